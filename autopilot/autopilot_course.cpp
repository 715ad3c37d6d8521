// Auto mode's course, decided at step boundaries: a plan running a whole step is judged by
// its time; under the online policy, the shape of the step just run chooses the plan that
// takes over (from memory or the plan cache), or, unknown, is recorded and planned.
#include "autopilot/autopilot.hpp"

#include "logging/log.hpp"

#include <exception>

namespace delta::autopilot {

void AutoPilot::start_recording() {
  // The previous source lets the device go before the next one takes it.
  recording_.source.reset();
  recording_.recorder.reset();
  recording_ = record_(options_.record_iterations);
  recorded_keys_.clear();
  // What the program holds already is where the recording starts from.
  for (const auto& [ptr, live] : live_) recording_.recorder->on_alloc(ptr, live.size, live.stream);
  recording_on_ = true;
}

// At a boundary a recording that cannot start (on a GPU: CUPTI taken by a profiler started
// since) leaves the shape unplanned, with a warning; the program goes on under the online
// policy. Only the first recording, in the constructor, refuses auto mode.
bool AutoPilot::try_start_recording() {
  try {
    start_recording();
    return true;
  } catch (const std::exception& e) {
    recording_on_ = false;
    log::warn("DELTA auto: after step {}, no recording can start ({}); the online policy keeps the budget", steps_,
              e.what());
    return false;
  }
}

void AutoPilot::abandon_recording() {
  recording_on_ = false;
  try {
    recording_.recorder->finish();  // records nothing more
  } catch (const std::exception& e) {
    log::debug("DELTA auto: the recording left unfinished: {}", e.what());
  }
}

void AutoPilot::start_planner() {
  planning_key_ = recorded_keys_.back();
  planner_ = std::make_unique<BackgroundPlanner>();
  PlanSettings settings;
  settings.gpu = options_.gpu;
  settings.budget_bytes = options_.budget_bytes;
  settings.page_size = allocator_.device().granularity();
  settings.host_limit_bytes = host_limit_;
  settings.discard_copies = options_.copy_discards;
  settings.time_limit_seconds = options_.plan_seconds;
  if (auto it = shapes_.find(planning_key_); it != shapes_.end()) settings.extra_margin_bytes = it->second.extra_margin_bytes;
  planner_->start(recording_.recorder->snapshot(), std::move(settings));
}

void AutoPilot::take_plan() {
  PlanOutcome outcome = planner_->take();
  report_.planning_wall_seconds += outcome.wall_seconds;
  if (report_.plans_made++ == 0) {
    report_.plan_aimed_bytes = outcome.aimed_bytes;
    report_.plan_attempts = outcome.attempts;
  } else {
    report_.replans++;
  }
  replanning_ = false;
  auto [it, fresh] = shapes_.try_emplace(planning_key_);
  if (fresh) shape_order_.push_back(planning_key_);
  Shape& shape = it->second;
  shape.report.key = planning_key_;
  shape.step = std::move(outcome.step);
  if (!outcome.plan) {
    shape.plan.reset();
    shape.report.refused = outcome.reason;
    if (report_.refused.empty()) report_.refused = outcome.reason;
    log::warn("DELTA auto: no plan for shape {} ({}); the online policy keeps the budget", planning_key_, outcome.reason);
    return;
  }
  shape.plan = std::move(*outcome.plan);
  shape.calibration = 0;  // a new plan: its first step judged calibrates again
  shape.report.plan_from = "planner";
  shape.report.refused.clear();
  shape.report.predicted_step_time_ns = shape.plan->predicted.step_time_ns;
  if (cache_.dir().empty()) return;
  try {
    cache_.store(PlanCache::key(planning_key_, options_.gpu, options_.budget_bytes), {*shape.plan, shape.step});
  } catch (const std::exception& e) {
    log::warn("DELTA auto: the plan is not cached: {}", e.what());
  }
}

bool AutoPilot::plan_known(const std::string& key) {
  if (auto it = shapes_.find(key); it != shapes_.end()) return it->second.plan.has_value();
  if (cache_.dir().empty()) return false;
  const std::string cache_key = PlanCache::key(key, options_.gpu, options_.budget_bytes);
  if (report_.cache_key.empty()) report_.cache_key = cache_key;
  std::string warning;
  std::optional<CachedPlan> cached = cache_.load(cache_key, &warning);
  if (!cached) {
    if (!warning.empty()) {
      report_.cache_warning = warning;
      log::warn("DELTA auto: {}; planning again", warning);
    }
    return false;
  }
  // A plan judged with the other discard model predicts another step: made again.
  if (cached->plan.predicted.discard_copies != options_.copy_discards) {
    log::info("DELTA auto: the cached plan {} was judged with discards {}, this run {} them; planning again", cache_key,
              cached->plan.predicted.discard_copies ? "copied" : "dropped", options_.copy_discards ? "copies" : "drops");
    return false;
  }
  Shape& shape = shapes_[key];
  shape_order_.push_back(key);
  shape.step = std::move(cached->step);
  shape.plan = std::move(cached->plan);
  shape.report.key = key;
  shape.report.plan_from = "cache";
  shape.report.predicted_step_time_ns = shape.plan->predicted.step_time_ns;
  return true;
}

// The running shape handed to the online policy and recorded again, its plan to be made again
// (the old one stays out until then: replanning_). False where the recording cannot start.
bool AutoPilot::record_again() {
  to_online();
  if (!try_start_recording()) return false;
  replanning_ = true;
  return true;
}

void AutoPilot::at_boundary(const std::string& key, std::uint64_t step_ns) {
  if (executor_) {  // the plan ran the whole step: judged by its time
    Shape& shape = shapes_.at(running_);
    shape.report.steps_planned++;
    shape.report.last_step_time_ns = step_ns;
    const bool off = watch_.step(step_ns);
    shape.calibration = watch_.calibration();
    shape.report.calibration = shape.calibration;
    // Over the budget under the plan: the live layout (the state where the online policy placed
    // it, its cached pages) lacked room the planner's ledger had (the transformer log at 0.3:
    // 172 MB, where the layout margin keeps 15 MB). Made again once, for that much less; the
    // online policy holds the budget meanwhile. The executor keeps the most it held above the
    // budget, not a count per step: acted on (or warned of) once per new excess. While another
    // shape is planned it waits for its turn.
    const std::uint64_t over = executor_->stats().over_budget_on_plan_bytes;
    const bool busy = recording_on_ || (planner_ && !planner_->taken());
    if (over > over_budget_seen_ && !busy) {
      over_budget_seen_ = over;
      if (shape.report.budget_replans > 0) {
        log::warn("DELTA auto: steps of shape {} hold {} bytes above the budget under its plan; it was made again for "
                  "less once already, it stays",
                  running_, over);
      } else {
        // Counted before the recording starts: where it cannot, the plan comes back at the next
        // boundary, and is not made again in a loop.
        const std::uint64_t page = allocator_.device().granularity();
        shape.extra_margin_bytes = (over + page - 1) / page * page + page;
        shape.report.budget_replans++;
        report_.budget_replans++;
        const std::string from = running_;
        if (!record_again()) return;
        log::warn("DELTA auto: after step {}, shape {} held {} bytes above the budget under its plan; the online policy "
                  "takes over while it is recorded and planned again for {} bytes less",
                  steps_, from, over, shape.extra_margin_bytes);
        return;
      }
    }
    if (!off) return;
    if (shape.report.timing_replans > 0 || busy) {
      log::warn("DELTA auto: steps of shape {} run {} times the plan's prediction; it was made again once already, "
                "it stays", running_, watch_.last_ratio());
      return;
    }
    shape.report.timing_replans++;
    report_.timing_replans++;
    const std::string from = running_;
    if (!record_again()) return;
    log::info("DELTA auto: after step {}, steps of shape {} run {} times the plan's prediction (calibrated at {}); the online policy "
              "takes over while it is recorded and planned again",
              steps_, from, watch_.last_ratio(), shape.calibration);
    return;
  }
  // Under the online policy.
  if (planner_ && !planner_->taken() && (options_.wait_for_plan || planner_->ready())) take_plan();
  if (recording_on_ && recording_.recorder->finished()) {
    recording_on_ = false;
    start_planner();
    return;  // the program keeps running under the online policy meanwhile
  }
  // The plan it had is being made again (recorded, then planned): until the new one is taken
  // above, the old one does not come back (it went over the budget, or off its time).
  if (replanning_) return;
  if (auto it = shapes_.find(key); it != shapes_.end() && !it->second.plan) return;  // refused: stays online
  if (plan_known(key)) {
    if (recording_on_) abandon_recording();  // a shape that has a plan needs no recording
    to_plan(key);
    return;
  }
  if (recording_on_ || (planner_ && !planner_->taken())) return;  // a shape is being learnt already
  if (shapes_.size() >= options_.max_shapes) {
    log::debug("DELTA auto: shape {} is not planned: {} shapes planned already", key, shapes_.size());
    return;
  }
  if (!try_start_recording()) return;
  log::info("DELTA auto: after step {}, shape {} has no plan: it is recorded", steps_, key);
}

}  // namespace delta::autopilot
