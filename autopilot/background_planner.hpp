// Planning while the job runs: DELTA's method on the recorded step, fitted as the executor
// places blocks, then judged again by the simulator through the caching allocator; a plan
// that does not hold the budget there is refused. One thread, started once; the job keeps
// running meanwhile and asks, at step boundaries, whether the plan is ready (or waits for it).
#pragma once

#include <delta/device.hpp>
#include <delta/plan.hpp>
#include <delta/trace.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <string>

namespace delta::autopilot {

struct PlanOutcome {
  std::optional<plan::Plan> plan;  // absent: refused, see `reason`
  trace::Trace step;               // the step it is for (kernel launches only)
  std::string reason;
  double wall_seconds = 0;         // planning and validation, wall time
  std::uint64_t aimed_bytes = 0;   // the budget the planner was last asked for (below the real one)
  int attempts = 0;
};

// What the planner is asked for, and how the plan is judged.
struct PlanSettings {
  std::string gpu;                     // the GPU profile the planner models
  std::uint64_t budget_bytes = 0;
  std::uint64_t page_size = 0;         // the device's mapping granularity
  // Nonzero: the pinned host memory the plan's executor may take (DELTA_HOST_BUDGET); the
  // planner knows no host limit, so a plan whose copies need more is refused here, naming both,
  // and the online policy keeps the job within both limits.
  std::uint64_t host_limit_bytes = 0;
  // The executor will copy discarded blocks to host (ExecutorOptions::copy_discards), so the
  // plan is judged with those copies.
  bool discard_copies = true;
  // DELTA_PLAN_SECONDS: past this many seconds of planning the planner refines no more
  // (PlanRequest::deadline); it still makes a whole plan. Each of the (at most three) tries
  // gets the whole limit. Absent: no limit.
  std::optional<double> time_limit_seconds;
  // Bytes the plan leaves besides the layout margin: what the step held above the budget
  // under the shape's last plan (AutoPilot's budget replan). 0 for a first plan.
  std::uint64_t extra_margin_bytes = 0;
};

// Synchronous: what the thread runs. Never throws; failures are in `reason`. Blocks the step
// holds from before it (persistent) and smaller than the page size sit, at the switch, on
// pages they share with others, where the online policy placed them: they cannot leave, so
// the plan's decisions for them are dropped before the simulator judges it.
PlanOutcome plan_and_validate(const trace::Trace& recorded, const PlanSettings& settings);

class BackgroundPlanner {
 public:
  BackgroundPlanner() = default;
  ~BackgroundPlanner();  // waits for the thread: a plan is never abandoned half made
  BackgroundPlanner(const BackgroundPlanner&) = delete;
  BackgroundPlanner& operator=(const BackgroundPlanner&) = delete;

  void start(trace::Trace recorded, PlanSettings settings);
  bool started() const { return future_.valid() || taken_; }
  bool taken() const { return taken_; }
  bool ready() const;  // the outcome can be taken without waiting
  PlanOutcome take();  // waits when it must; once

 private:
  std::future<PlanOutcome> future_;
  bool taken_ = false;
};

}  // namespace delta::autopilot
