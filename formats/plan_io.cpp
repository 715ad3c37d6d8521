// Plan JSON reader/writer and the plan-versus-trace check.
#include <delta/plan.hpp>

#include "gzip_codec.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace delta::plan {
namespace {

using nlohmann::json;

const char* kFormatName = "delta-plan";

// The trace a plan is for; "iteration" only when it is one iteration of it, so that plans of
// whole traces read and write as they always have.
json trace_json(const Plan& plan) {
  json out = {{"hash", plan.trace_hash}, {"ops", plan.trace_ops}, {"blocks", plan.trace_blocks}};
  if (plan.trace_iteration) out["iteration"] = *plan.trace_iteration;
  return out;
}

json interval_to_json(const Interval& interval) {
  json out = {{"action", to_string(interval.action)}, {"release_after", interval.release_after}};
  if (interval.action == Action::discard) return out;
  if (interval.action == Action::retain) {
    out["until"] = interval.until;
    return out;
  }
  out["needed_by"] = interval.needed_by;
  if (interval.action == Action::swap) {
    out["prefetch_at"] = interval.prefetch_at;
    if (interval.copy_after) out["copy_after"] = *interval.copy_after;
    if (interval.bytes) out["bytes"] = *interval.bytes;
  } else {
    if (interval.action == Action::revive) out["until"] = interval.until;
    out["replay"] = interval.replay;
    out["inputs"] = interval.inputs;
  }
  return out;
}

// Field access that names the path of anything missing or mistyped.
const json& field(const json& object, const char* name, const std::string& where) {
  if (!object.is_object()) throw PlanError(where + ": expected an object");
  auto it = object.find(name);
  if (it == object.end()) throw PlanError(where + ": missing field '" + name + "'");
  return *it;
}

std::uint64_t unsigned_field(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
    throw PlanError(where + "." + name + ": expected a non-negative integer");
  return value.get<std::uint64_t>();
}

std::vector<std::uint64_t> unsigned_list(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_array()) throw PlanError(where + "." + name + ": expected an array");
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_number_unsigned())
      throw PlanError(where + "." + name + "[" + std::to_string(i) + "]: expected a non-negative integer");
    out.push_back(value[i].get<std::uint64_t>());
  }
  return out;
}

Interval interval_from_json(const json& in, const std::string& where) {
  Interval interval;
  const json& action = field(in, "action", where);
  if (action == "swap") {
    interval.action = Action::swap;
    interval.prefetch_at = unsigned_field(in, "prefetch_at", where);
    if (in.contains("copy_after")) interval.copy_after = unsigned_field(in, "copy_after", where);
    if (in.contains("bytes")) interval.bytes = unsigned_field(in, "bytes", where);
  } else if (action == "regenerate" || action == "revive") {
    interval.action = action == "revive" ? Action::revive : Action::regenerate;
    if (interval.action == Action::revive) interval.until = unsigned_field(in, "until", where);
    interval.replay = unsigned_list(in, "replay", where);
    interval.inputs = unsigned_list(in, "inputs", where);
    if (interval.replay.empty()) throw PlanError(where + ".replay: a regeneration needs at least one op");
  } else if (action == "discard") {
    interval.action = Action::discard;
  } else if (action == "retain") {
    interval.action = Action::retain;
    interval.until = unsigned_field(in, "until", where);
  } else {
    throw PlanError(where + ".action: expected \"swap\", \"regenerate\", \"discard\", \"revive\" or \"retain\", got " +
                    action.dump());
  }
  interval.release_after = unsigned_field(in, "release_after", where);
  if (interval.action != Action::discard && interval.action != Action::retain) interval.needed_by = unsigned_field(in, "needed_by", where);
  return interval;
}

}  // namespace

const char* to_string(Action action) {
  switch (action) {
    case Action::swap: return "swap";
    case Action::regenerate: return "regenerate";
    case Action::discard: return "discard";
    case Action::revive: return "revive";
    case Action::retain: return "retain";
  }
  return "?";
}

std::string to_json_text(const Plan& plan) {
  json decisions = json::array();
  for (const BlockDecision& decision : plan.decisions) {
    if (decision.intervals.empty()) continue;
    json intervals = json::array();
    for (const Interval& interval : decision.intervals) intervals.push_back(interval_to_json(interval));
    decisions.push_back({{"block", decision.block}, {"intervals", intervals}});
  }
  json out = {
      {"format", kFormatName},
      {"version", plan.version},
      {"method", plan.method},
      {"trace", trace_json(plan)},
      {"gpu", plan.gpu_profile},
      {"budget_bytes", plan.budget_bytes},
      {"budget_ratio", plan.budget_ratio},
      {"predicted",
       {{"peak_bytes", plan.predicted.peak_bytes},
        {"step_time_ns", plan.predicted.step_time_ns},
        {"native_step_time_ns", plan.predicted.native_step_time_ns},
        {"overhead", plan.predicted.overhead},
        {"feasible", plan.predicted.feasible},
        {"reserved_peak_bytes", plan.predicted.reserved_peak_bytes},
        {"planned_fraction", plan.predicted.planned_fraction}}},
      {"decisions", decisions}};
  // Only for plans fitted through the allocator, and only when not the planner's default way,
  // so that older plans and their golden files read and write as they always have.
  if (plan.predicted.reserved_peak_bytes > 0 && plan.predicted.executor_placement)
    out["predicted"]["placement"] = !plan.predicted.packed_moves ? "executor"
                                    : plan.predicted.packed_groups ? "executor-packed-grouped"
                                                                   : "executor-packed";
  // Likewise, only when not the planner's default model: older files read as they were written.
  if (plan.predicted.discard_copies) out["predicted"]["discards"] = "copied";
  if (plan.predicted.host_pace) out["predicted"]["timing"] = "host-paced";
  if (plan.predicted.copies_back_by_need) out["predicted"]["copies_back"] = "by-need";
  return out.dump(1);
}

Plan parse_plan(const std::string& json_text, const std::string& origin) {
  // The JSON reader stops at a NUL byte as at the end of the text: what follows would go unread.
  if (const auto nul = json_text.find('\0'); nul != std::string::npos)
    throw PlanError(origin + ": a NUL byte at offset " + std::to_string(nul) + ": not a JSON text");
  json in;
  try {
    in = json::parse(json_text);
  } catch (const json::exception& e) {  // syntax, and numbers too large for any type (out_of_range)
    throw PlanError(origin + ": not valid JSON (" + e.what() + ")");
  }
  if (!in.is_object()) throw PlanError(origin + ": a plan is a JSON object");
  try {
    const json& format = field(in, "format", origin);
    if (format != kFormatName) throw PlanError(origin + ": not a DELTA plan (format is " + format.dump() + ")");
    Plan plan;
    const json& version = field(in, "version", origin);
    if (!version.is_number_integer()) throw PlanError(origin + ".version: expected an integer");
    const std::int64_t written = version.get<std::int64_t>();  // read whole: a wider number must not wrap to a supported one
    if (written != kPlanFormatVersion)
      throw PlanError(origin + ": plan format version " + version.dump() +
                      " is not supported (this build reads version " + std::to_string(kPlanFormatVersion) + ")");
    plan.version = kPlanFormatVersion;
    const json& method = field(in, "method", origin);
    if (!method.is_string()) throw PlanError(origin + ".method: expected a string");
    plan.method = method.get<std::string>();
    const json& trace = field(in, "trace", origin);
    const json& hash = field(trace, "hash", origin + ".trace");
    if (!hash.is_string()) throw PlanError(origin + ".trace.hash: expected a string");
    plan.trace_hash = hash.get<std::string>();
    plan.trace_ops = unsigned_field(trace, "ops", origin + ".trace");
    plan.trace_blocks = unsigned_field(trace, "blocks", origin + ".trace");
    if (trace.contains("iteration")) {
      const std::uint64_t iteration = unsigned_field(trace, "iteration", origin + ".trace");
      if (iteration > 0xFFFFFFFFu) throw PlanError(origin + ".trace.iteration: " + std::to_string(iteration) + " is out of range");
      plan.trace_iteration = static_cast<std::uint32_t>(iteration);
    }
    const json& gpu = field(in, "gpu", origin);
    if (!gpu.is_string()) throw PlanError(origin + ".gpu: expected a GPU profile name");
    plan.gpu_profile = gpu.get<std::string>();
    plan.budget_bytes = unsigned_field(in, "budget_bytes", origin);
    // Every plan is for a budget: 0 would read as none, every block free to stay.
    if (plan.budget_bytes == 0) throw PlanError(origin + ".budget_bytes: 0 is no budget (a plan is made for one of at least a byte)");
    const json& ratio = field(in, "budget_ratio", origin);
    if (!ratio.is_number() || ratio.get<double>() < 0) throw PlanError(origin + ".budget_ratio: expected a number >= 0");
    plan.budget_ratio = ratio.get<double>();
    if (auto it = in.find("predicted"); it != in.end()) {
      const std::string where = origin + ".predicted";
      plan.predicted.peak_bytes = unsigned_field(*it, "peak_bytes", where);
      plan.predicted.step_time_ns = static_cast<std::int64_t>(unsigned_field(*it, "step_time_ns", where));
      plan.predicted.native_step_time_ns = static_cast<std::int64_t>(unsigned_field(*it, "native_step_time_ns", where));
      const json& overhead = field(*it, "overhead", where);
      if (!overhead.is_number()) throw PlanError(where + ".overhead: expected a number");
      plan.predicted.overhead = overhead.get<double>();
      const json& feasible = field(*it, "feasible", where);
      if (!feasible.is_boolean()) throw PlanError(where + ".feasible: expected true or false");
      plan.predicted.feasible = feasible.get<bool>();
      // Added later within version 1: absent in older files.
      if (it->contains("reserved_peak_bytes")) plan.predicted.reserved_peak_bytes = unsigned_field(*it, "reserved_peak_bytes", where);
      if (auto fraction = it->find("planned_fraction"); fraction != it->end()) {
        if (!fraction->is_number() || !(fraction->get<double>() > 0 && fraction->get<double>() <= 1))
          throw PlanError(where + ".planned_fraction: expected a number in (0, 1]");
        plan.predicted.planned_fraction = fraction->get<double>();
      }
      if (auto placement = it->find("placement"); placement != it->end()) {
        if (!placement->is_string() || (*placement != "executor" && *placement != "executor-packed" &&
                                        *placement != "executor-packed-grouped" && *placement != "planner"))
          throw PlanError(where + ".placement: expected \"executor\", \"executor-packed\", \"executor-packed-grouped\" or \"planner\", found " +
                          placement->dump());
        plan.predicted.executor_placement = *placement != "planner";
        plan.predicted.packed_moves = *placement == "executor-packed" || *placement == "executor-packed-grouped";
        plan.predicted.packed_groups = *placement == "executor-packed-grouped";
      }
      if (auto discards = it->find("discards"); discards != it->end()) {
        if (!discards->is_string() || (*discards != "copied" && *discards != "dropped"))
          throw PlanError(where + ".discards: expected \"copied\" or \"dropped\", found " + discards->dump());
        plan.predicted.discard_copies = *discards == "copied";
      }
      if (auto timing = it->find("timing"); timing != it->end()) {
        if (!timing->is_string() || (*timing != "host-paced" && *timing != "device"))
          throw PlanError(where + ".timing: expected \"host-paced\" or \"device\", found " + timing->dump());
        plan.predicted.host_pace = *timing == "host-paced";
      }
      if (auto copies_back = it->find("copies_back"); copies_back != it->end()) {
        if (!copies_back->is_string() || (*copies_back != "by-need" && *copies_back != "in-plan-order"))
          throw PlanError(where + ".copies_back: expected \"by-need\" or \"in-plan-order\", found " + copies_back->dump());
        plan.predicted.copies_back_by_need = *copies_back == "by-need";
      }
    }
    const json& decisions = field(in, "decisions", origin);
    if (!decisions.is_array()) throw PlanError(origin + ".decisions: expected an array");
    for (std::size_t d = 0; d < decisions.size(); ++d) {
      const std::string where = origin + ".decisions[" + std::to_string(d) + "]";
      BlockDecision decision;
      decision.block = unsigned_field(decisions[d], "block", where);
      const json& intervals = field(decisions[d], "intervals", where);
      if (!intervals.is_array()) throw PlanError(where + ".intervals: expected an array");
      for (std::size_t i = 0; i < intervals.size(); ++i)
        decision.intervals.push_back(interval_from_json(intervals[i], where + ".intervals[" + std::to_string(i) + "]"));
      plan.decisions.push_back(std::move(decision));
    }
    return plan;
  } catch (const json::exception& e) {
    throw PlanError(origin + ": " + e.what());
  }
}

Plan read_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PlanError(path + ": cannot open the plan file");
  std::stringstream text;
  text << in.rdbuf();
  std::string bytes = text.str();
  // Compressed or not, told by content (the golden plans are stored compressed). A plan is a
  // few MB even for a long trace: a file that inflates past 1 GiB is refused, not held.
  constexpr std::uint64_t kMaxPlanTextBytes = std::uint64_t{1} << 30;
  if (trace::is_gzip(bytes)) {
    try {
      bytes = trace::gunzip(bytes, kMaxPlanTextBytes);
    } catch (const trace::TraceError& e) {
      throw PlanError(path + ": a damaged gzip file (" + e.what() + ")");
    }
  }
  return parse_plan(bytes, path);
}

namespace {

bool ends_with_gz(const std::string& path) { return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0; }

}  // namespace

void write_plan(const Plan& plan, const std::string& path) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw PlanError(path + ": cannot write the plan file");
    const std::string text = to_json_text(plan) + '\n';
    out << (ends_with_gz(path) ? trace::gzip(text) : text);
    if (!out) throw PlanError(path + ": write failed");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw PlanError(path + ": cannot move the written plan into place");
  }
}

void check_plan_matches(const Plan& plan, const trace::Trace& trace) {
  const std::string hash = trace_fingerprint(trace);
  if (plan.trace_hash != hash)
    throw PlanError("the plan was made for another trace (plan trace hash " + plan.trace_hash +
                    (plan.trace_iteration ? " of its iteration " + std::to_string(*plan.trace_iteration) : "") +
                    ", this trace " + hash + ")");
  if (plan.trace_ops != trace.ops.size() || plan.trace_blocks != trace.blocks.size())
    throw PlanError("the plan expects " + std::to_string(plan.trace_ops) + " ops and " +
                    std::to_string(plan.trace_blocks) + " blocks, the trace has " +
                    std::to_string(trace.ops.size()) + " and " + std::to_string(trace.blocks.size()));
  std::unordered_map<std::uint64_t, bool> known;
  std::unordered_map<std::uint64_t, std::uint64_t> size_of;
  for (const trace::Block& block : trace.blocks) {
    known[block.id] = false;
    size_of[block.id] = block.size;
  }
  const std::uint64_t ops = trace.ops.size();
  for (std::size_t d = 0; d < plan.decisions.size(); ++d) {
    const BlockDecision& decision = plan.decisions[d];
    const std::string where = "decisions[" + std::to_string(d) + "] (block " + std::to_string(decision.block) + ")";
    auto it = known.find(decision.block);
    if (it == known.end()) throw PlanError(where + ": unknown block");
    if (it->second) throw PlanError(where + ": the block has two decisions");
    it->second = true;
    std::uint64_t previous_end = 0;
    for (std::size_t i = 0; i < decision.intervals.size(); ++i) {
      const Interval& interval = decision.intervals[i];
      const std::string at = where + ".intervals[" + std::to_string(i) + "]";
      if (interval.release_after >= ops) throw PlanError(at + ": release_after names op " + std::to_string(interval.release_after) + ", the trace has " + std::to_string(ops) + " ops");
      if (i > 0 && interval.release_after < previous_end) throw PlanError(at + ": overlaps the previous interval");
      if (interval.action == Action::discard || interval.action == Action::retain) {
        for (std::size_t k = i + 1; k < decision.intervals.size(); ++k)
          if (decision.intervals[k].action != Action::revive)
            throw PlanError(at + ": only revivals may follow a " + to_string(interval.action));
        if (interval.action == Action::retain) {
          if (interval.until <= interval.release_after || interval.until >= ops)
            throw PlanError(at + ": until must lie in (release_after, last op]");
          previous_end = interval.until;  // freed after op `until`: a revival may follow
        }
        continue;
      }
      if (interval.needed_by > ops) throw PlanError(at + ": needed_by names op " + std::to_string(interval.needed_by) + " past the end of the trace");
      if (interval.needed_by <= interval.release_after) throw PlanError(at + ": needed_by must come after release_after");
      const std::uint64_t previous_needed = previous_end;
      previous_end = interval.needed_by;
      if (interval.action == Action::revive) {
        if (interval.until < interval.needed_by || interval.until >= ops)
          throw PlanError(at + ": until must lie in [needed_by, last op]");
        previous_end = interval.until;  // freed again after op `until`
      }
      if (interval.action == Action::swap) {
        if (interval.prefetch_at <= interval.release_after || interval.prefetch_at > interval.needed_by)
          throw PlanError(at + ": prefetch_at must lie in (release_after, needed_by]");
        // The copy starts while the block is on the device: after the previous interval has
        // brought it back.
        if (interval.copy_after && (*interval.copy_after > interval.release_after || (i > 0 && *interval.copy_after < previous_needed)))
          throw PlanError(at + ": copy_after must lie in [" + (i > 0 ? "the previous interval's needed_by" : std::string("0")) +
                          ", release_after]");
        if (interval.bytes) {
          const std::uint64_t size = size_of.at(decision.block);
          if (*interval.bytes == 0 || *interval.bytes >= size || *interval.bytes % kSwapGranularity != 0)
            throw PlanError(at + ": bytes must be a positive multiple of " + std::to_string(kSwapGranularity) +
                            " below the block's size " + std::to_string(size) + " (omit it to swap the whole block), got " +
                            std::to_string(*interval.bytes));
        }
      } else {
        for (std::uint64_t op : interval.replay) {
          if (op >= ops) throw PlanError(at + ": replay names unknown op " + std::to_string(op));
          if (op >= interval.needed_by) throw PlanError(at + ": replays op " + std::to_string(op) + ", which has not run yet at op " + std::to_string(interval.needed_by));
        }
        for (std::uint64_t input : interval.inputs)
          if (!known.count(input)) throw PlanError(at + ": unknown input block " + std::to_string(input));
      }
    }
  }
}

}  // namespace delta::plan
