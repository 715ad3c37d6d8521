#include "autopilot/background_planner.hpp"

#include "autopilot/step_trace.hpp"

#include "methods.hpp"
#include "sim/simulator.hpp"
#include "trace/trace_index.hpp"

#include <exception>

namespace delta::autopilot {

PlanOutcome plan_and_validate(const trace::Trace& recorded, const std::string& gpu, std::uint64_t budget_bytes) {
  const auto start = std::chrono::steady_clock::now();
  PlanOutcome out;
  try {
    out.step = planning_step(recorded);
    planner::TraceIndex index(out.step);
    planner::PlanRequest request;
    request.index = &index;
    request.gpu = gpu_profile(gpu);
    request.budget_bytes = budget_bytes;
    request.budget_ratio = index.native_peak() ? double(budget_bytes) / double(index.native_peak()) : 0.0;
    request.through_allocator = true;
    request.executor_placement = true;  // as the executor will place the blocks it moves
    planner::MethodResult made = planner::run_method("delta", request);
    if (!made.plan || !made.feasible) {
      out.reason = "no plan fits a budget of " + std::to_string(budget_bytes) + " bytes: " + made.reason;
    } else {
      // The simulator's verdict, through the allocator capped at the budget, as it will run.
      planner::SimulationOptions options;
      options.gpu = request.gpu;
      options.budget_bytes = budget_bytes;
      options.through_allocator = true;
      options.executor_placement = true;
      const planner::SimulationResult judged = planner::simulate(index, *made.plan, options);
      if (!judged.feasible)
        out.reason = "the simulator refuses the plan: " + judged.error;
      else
        out.plan = std::move(*made.plan);
    }
  } catch (const std::exception& e) {
    out.reason = e.what();
  }
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

BackgroundPlanner::~BackgroundPlanner() {
  if (future_.valid()) future_.wait();
}

void BackgroundPlanner::start(trace::Trace recorded, std::string gpu, std::uint64_t budget_bytes) {
  future_ = std::async(std::launch::async, [recorded = std::move(recorded), gpu = std::move(gpu), budget_bytes] {
    return plan_and_validate(recorded, gpu, budget_bytes);
  });
}

bool BackgroundPlanner::ready() const {
  return future_.valid() && future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

PlanOutcome BackgroundPlanner::take() {
  taken_ = true;
  return future_.get();
}

}  // namespace delta::autopilot
