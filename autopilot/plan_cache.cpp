#include "autopilot/plan_cache.hpp"

#include "autopilot/steps/step_key.hpp"

#include <cstdlib>
#include <exception>
#include <filesystem>

#ifndef DELTA_VERSION_TEXT
#define DELTA_VERSION_TEXT "unknown"
#endif

namespace delta::autopilot {

PlanCache::PlanCache(std::string dir) : dir_(dir.empty() ? default_dir() : std::move(dir)) {}

PlanCache PlanCache::none() {
  PlanCache cache("-");
  cache.dir_.clear();
  return cache;
}

std::string PlanCache::default_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/delta/plans";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/delta/plans";
  return {};
}

std::string PlanCache::key(const std::string& structure, const std::string& gpu, std::uint64_t budget_bytes) {
  StepKey k;
  k.text(structure);
  k.text(gpu);
  k.text(DELTA_VERSION_TEXT);
  k.allocation(budget_bytes);
  return structure + "-" + k.hex();
}

std::string PlanCache::plan_path(const std::string& key) const { return dir_ + "/" + key + ".plan.json"; }
std::string PlanCache::step_path(const std::string& key) const { return dir_ + "/" + key + ".step.json.gz"; }

std::optional<CachedPlan> PlanCache::load(const std::string& key, std::string* warning) const {
  if (dir_.empty()) return std::nullopt;
  const std::string plan_file = plan_path(key), step_file = step_path(key);
  std::error_code ec;
  if (!std::filesystem::exists(plan_file, ec) && !std::filesystem::exists(step_file, ec)) return std::nullopt;
  std::string reading = plan_file;
  try {
    CachedPlan entry;
    entry.plan = plan::read_plan(plan_file);
    reading = step_file;
    entry.step = trace::read_trace(step_file);
    plan::check_plan_matches(entry.plan, entry.step);
    return entry;
  } catch (const std::exception& e) {
    if (warning) *warning = "the cached plan " + reading + " cannot be used (" + e.what() + ")";
    return std::nullopt;
  }
}

void PlanCache::store(const std::string& key, const CachedPlan& entry) const {
  if (dir_.empty()) throw std::runtime_error("no plan cache directory (set DELTA_PLAN_CACHE, XDG_CACHE_HOME or HOME)");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw std::runtime_error("cannot create the plan cache directory " + dir_ + ": " + ec.message());
  trace::write_trace(entry.step, step_path(key));
  plan::write_plan(entry.plan, plan_path(key));
}

}  // namespace delta::autopilot
