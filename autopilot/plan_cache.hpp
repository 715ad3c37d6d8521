// Plans kept on disk between runs (DELTA_PLAN_CACHE; default $XDG_CACHE_HOME/delta/plans, or
// ~/.cache/delta/plans), so that a second run of the same job starts planned. An entry is
// keyed by the program's structure (StepKey of its first step, which is how a run recognises
// the program before anything else), the GPU, the budget and DELTA's version; it holds the
// plan and the step it was made for. A file that cannot be read back is reported by name and
// ignored: the run plans again and writes the entry anew.
#pragma once

#include <delta/plan.hpp>
#include <delta/trace.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace delta::autopilot {

struct CachedPlan {
  plan::Plan plan;
  trace::Trace step;
};

class PlanCache {
 public:
  // `dir` empty: the default directory. Nothing is created until store().
  explicit PlanCache(std::string dir);
  static PlanCache none();  // a cache that holds nothing and refuses to store
  static std::string default_dir();  // from XDG_CACHE_HOME or HOME; empty when neither is set

  static std::string key(const std::string& structure, const std::string& gpu, std::uint64_t budget_bytes);
  // The entry, or nullopt (none, or unreadable: then `warning` says which file and why).
  std::optional<CachedPlan> load(const std::string& key, std::string* warning) const;
  // Writes the entry (atomically, file by file); throws std::runtime_error naming the path.
  void store(const std::string& key, const CachedPlan& entry) const;

  std::string plan_path(const std::string& key) const;
  std::string step_path(const std::string& key) const;
  const std::string& dir() const { return dir_; }  // empty: none

 private:
  std::string dir_;
};

}  // namespace delta::autopilot
