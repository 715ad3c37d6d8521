// Faults the executor must survive without losing data: no room to prefetch, a replay whose
// parameters were not captured, and the guard fetching what the plan forgot.
#include "executor/executor.hpp"
#include "executor_fixtures.hpp"

#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::executor::testing;
using delta::planner::testing::kMs;
using delta::planner::testing::kX;
using trace::Access;

TEST_CASE("a prefetch that finds no room waits for the guard, which fetches the block late", "[executor]") {
  // X is brought back at op 2, while Y (100 MB, allocated before op 1 here) is live: under
  // this budget there is no room, so the prefetch is put off and the guard fetches X when op 4
  // needs it.
  trace::Trace t = planner::testing::swap_trace();
  t.blocks[1].alloc_ns = 10 * kMs;
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 2, 4));
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.unmapped_accesses == 0);
  CHECK(out.run.executor.late_fetches == 3);
  CHECK(out.run.reserved_peak_bytes <= p.budget_bytes);
}

TEST_CASE("a plan that forgets to bring a block back costs time, not data", "[executor]") {
  // The swap's prefetch comes at the end of the step, after op 4 reads X: the guard fetches it.
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  plan::Interval wrong = swap(0, 3, 4);
  wrong.prefetch_at = 5;
  wrong.needed_by = 5;
  add(p, 1, wrong);
  const Outcome out = run_both(t, p);
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.comparison.identical);
  CHECK(out.run.unmapped_accesses == 0);
  CHECK(out.run.executor.late_fetches == 3);
}

TEST_CASE("a regeneration whose launch was not captured is swapped instead", "[executor]") {
  // Driven by hand, through a route that cannot copy launch parameters (Launch::capture empty).
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, regeneration(0, 4, {0}));
  Rig rig(t, p);
  executor::Executor& exec = rig.exec;
  SimDevice& sim = rig.sim;
  const auto& device = rig.device;
  const StreamHandle stream = rig.stream;
  void* x = exec.allocate(kX, stream);
  const auto ptr = reinterpret_cast<DevicePtr>(x);
  auto launch = [&](const char* name, std::vector<executor::LaunchRange> ranges, std::uint64_t seed) {
    exec.before_launch({name, stream, ranges, {}});
    SimLaunch l;
    l.name = name;
    l.duration_ns = 10 * kMs;
    l.seed = seed;
    for (const auto& r : ranges) {
      if (r.read) l.reads.push_back({r.ptr, r.bytes});
      if (r.write) l.writes.push_back({r.ptr, r.bytes});
    }
    sim.launch(l, stream);
    exec.check_invariants();
  };
  launch("produce_x", {{ptr, kX, false, true}}, 7);
  device->synchronize();
  const std::uint64_t before = sim.digest(ptr, kX);
  launch("filler_a", {}, 0);
  void* y = exec.allocate(planner::testing::kY, stream);
  launch("produce_y", {{reinterpret_cast<DevicePtr>(y), planner::testing::kY, false, true}}, 9);
  exec.deallocate(y);
  launch("filler_b", {}, 0);
  CHECK(exec.stats().regenerations_swapped == 1);
  CHECK(exec.stats().regenerations == 0);
  launch("consume_x", {{ptr, kX, true, false}}, 11);
  exec.end_step();
  device->synchronize();
  CHECK(sim.digest(ptr, kX) == before);
  CHECK(sim.counters().unmapped_accesses == 0);
  exec.check_invariants();
}

TEST_CASE("the budget is refused when the device is smaller", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, std::uint64_t{1} << 50);
  const executor::StepProgram program = executor::step_program(t);
  auto device = make_sim_device(SimOptions{.profile = "titanv"});
  CachingAllocator allocator(device, AllocatorConfig{});
  CHECK_THROWS_WITH(executor::Executor(allocator, program, executor::schedule_actions(p, t, program)),
                    Catch::Contains("more than the device's"));
}
