// Host overhead of run mode on the sim path, against cache mode measured in the same run: an
// op of a step (allocate, launch, free) with no action due, and a launch alone seen by the
// executor's launch hook against a plain one.
#include "bench/bench_steps.hpp"
#include "executor/executor.hpp"
#include "executor/routes/sim_route.hpp"

#include <delta/plan.hpp>
#include <delta/sim_device.hpp>

#include <benchmark/benchmark.h>

namespace {

using namespace delta;
using namespace delta::bench;

struct Setup {
  trace::Trace trace = step_trace();
  std::shared_ptr<Device> device = make_sim_device(SimOptions{.profile = "h200", .content = SimContent::none});
  SimDevice& sim = *as_sim(device.get());
  CachingAllocator allocator{device, AllocatorConfig{}};
  StreamHandle stream = device->create_stream();
};

SimLaunch bench_launch(DevicePtr ptr) {
  SimLaunch l;
  l.name = "op";
  l.duration_ns = 1;
  l.reads.push_back({ptr, kBytes});
  return l;
}

// One op of a step as the program runs it: allocate its block, launch it, free the block.
void BM_cache_op(benchmark::State& state) {
  Setup s;
  for (auto _ : state) {
    void* p = s.allocator.allocate(kBytes, s.stream);
    s.sim.launch(bench_launch(reinterpret_cast<DevicePtr>(p)), s.stream);
    s.allocator.deallocate(p);
  }
}
BENCHMARK(BM_cache_op);

// The same under an empty plan: the executor matches the allocation, its hook sees the launch
// (no action due), and the step ends every kOps ops.
void BM_run_op(benchmark::State& state) {
  Setup s;
  const executor::StepProgram program = executor::step_program(s.trace);
  executor::Executor exec(s.allocator, program, executor::schedule_actions(empty_plan(s.trace), s.trace, program));
  executor::SimLaunchRoute route(s.sim, exec);
  std::size_t k = 0;
  for (auto _ : state) {
    void* p = exec.allocate(kBytes, s.stream);
    s.sim.launch(bench_launch(reinterpret_cast<DevicePtr>(p)), s.stream);
    exec.deallocate(p);
    if (++k == kOps) {
      exec.end_step();
      k = 0;
    }
  }
  if (exec.stats().divergences != 0) state.SkipWithError("the benchmark strayed from the plan's step");
}
BENCHMARK(BM_run_op);

// Allocation calls alone (allocate and free, no action due), against the allocator's own. The
// launches that move the step's clock run every kOps calls with the timer paused, in both.
void BM_cache_alloc(benchmark::State& state) {
  Setup s;
  SimLaunch idle;
  idle.name = "op";
  idle.duration_ns = 1;
  std::size_t k = 0;
  for (auto _ : state) {
    void* p = s.allocator.allocate(kBytes, s.stream);
    s.allocator.deallocate(p);
    if (++k == kOps) {
      state.PauseTiming();
      for (std::size_t i = 0; i < kOps; ++i) s.sim.launch(idle, s.stream);  // as BM_run_alloc: the same caches to warm
      k = 0;
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_cache_alloc);

void BM_run_alloc(benchmark::State& state) {
  Setup s;
  const executor::StepProgram program = executor::step_program(s.trace);
  executor::Executor exec(s.allocator, program, executor::schedule_actions(empty_plan(s.trace), s.trace, program));
  executor::SimLaunchRoute route(s.sim, exec);
  SimLaunch idle;
  idle.name = "op";
  idle.duration_ns = 1;
  std::size_t k = 0;
  for (auto _ : state) {
    void* p = exec.allocate(kBytes, s.stream);
    exec.deallocate(p);
    if (++k == kOps) {
      state.PauseTiming();
      for (std::size_t i = 0; i < kOps; ++i) s.sim.launch(idle, s.stream);
      exec.end_step();
      k = 0;
      state.ResumeTiming();
    }
  }
  if (exec.stats().divergences != 0) state.SkipWithError("the benchmark strayed from the plan's step");
}
BENCHMARK(BM_run_alloc);

void BM_plain_launch(benchmark::State& state) {
  Setup s;
  void* p = s.allocator.allocate(kBytes, s.stream);
  const SimLaunch l = bench_launch(reinterpret_cast<DevicePtr>(p));
  for (auto _ : state) s.sim.launch(l, s.stream);
}
BENCHMARK(BM_plain_launch);

void BM_guarded_launch(benchmark::State& state) {
  Setup s;
  s.trace = launch_trace();
  const executor::StepProgram program = executor::step_program(s.trace);
  executor::Executor exec(s.allocator, program, executor::schedule_actions(empty_plan(s.trace), s.trace, program));
  executor::SimLaunchRoute route(s.sim, exec);
  void* p = exec.allocate(kBytes, s.stream);
  const SimLaunch l = bench_launch(reinterpret_cast<DevicePtr>(p));
  std::size_t k = 0;
  for (auto _ : state) {
    s.sim.launch(l, s.stream);
    if (++k == kOps) {
      exec.end_step();
      k = 0;
    }
  }
  if (exec.stats().divergences != 0) state.SkipWithError("the benchmark strayed from the plan's step");
}
BENCHMARK(BM_guarded_launch);

}  // namespace

BENCHMARK_MAIN();
