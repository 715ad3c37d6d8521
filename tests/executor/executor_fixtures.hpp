// Plans written by hand for the hand-built traces of the planner's tests, and a run of both
// modes through the program runner.
#pragma once

#include "executor/step/action_schedule.hpp"
#include "executor/executor.hpp"
#include "executor/step/step_program.hpp"
#include "hand_plans.hpp"
#include "tiny_traces.hpp"
#include "tools/execute/program_runner.hpp"

#include <delta/plan.hpp>
#include <delta/sim_device.hpp>

namespace delta::executor::testing {

using planner::testing::discard;
using planner::testing::plan_for;
using planner::testing::regeneration;
using planner::testing::swap;

// A Titan V sim holding digests, an allocator on it and an executor running `p` on `t`: for
// tests that drive the entry points by hand.
struct Rig {
  Rig(const trace::Trace& t, const plan::Plan& p)
      : program(step_program(t)),
        device(make_sim_device(SimOptions{.profile = "titanv", .content = SimContent::digest})),
        sim(*as_sim(device.get())),
        allocator(device, AllocatorConfig{}),
        exec(allocator, program, schedule_actions(p, t, program)),
        stream(device->create_stream()) {}
  StepProgram program;
  std::shared_ptr<Device> device;
  SimDevice& sim;
  CachingAllocator allocator;
  Executor exec;
  StreamHandle stream;
};

inline void add(plan::Plan& p, std::uint64_t block, const plan::Interval& interval) {
  for (plan::BlockDecision& d : p.decisions)
    if (d.block == block) {
      d.intervals.push_back(interval);
      return;
    }
  p.decisions.push_back({block, {interval}});
}

struct Outcome {
  execute::ProgramRun cache, run;
  execute::Comparison comparison;
};

// `faults` prepares the sim device of the run under the plan only (SimDevice::inject_fault).
inline Outcome run_both(const trace::Trace& t, const plan::Plan& p, std::size_t iterations = 3,
                       std::optional<std::uint64_t> perturb = std::nullopt,
                       std::function<void(SimDevice&)> faults = {}) {
  const StepProgram program = step_program(t);
  execute::ProgramOptions options;
  options.gpu = t.gpu.profile;
  options.iterations = iterations;
  options.perturb = perturb;
  options.check_invariants = true;
  Outcome out;
  out.cache = execute::run_program(t, program, nullptr, options);
  options.prepare_device = std::move(faults);
  out.run = execute::run_program(t, program, &p, options);
  out.comparison = execute::compare_runs(out.cache, out.run);
  return out;
}

}  // namespace delta::executor::testing
