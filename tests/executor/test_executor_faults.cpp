// Faults the executor must survive without losing data: no room to prefetch, no device memory
// for it, copies the device refuses, no pinned memory at start, a replay whose parameters were
// not captured or whose module is unloading, and the guard fetching what the plan forgot.
#include "executor/executor.hpp"
#include "executor_fixtures.hpp"

#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::executor::testing;
using delta::planner::testing::kMs;
using delta::planner::testing::kX;
using trace::Access;
using executor::Relaunch;

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

TEST_CASE("a copy to host the device refuses leaves the block on the device", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  // The first step's copy out fails, and so does the second try at the release: X stays
  // resident, Y is served above the budget; the next steps swap as planned.
  const Outcome out = run_both(t, p, 3, std::nullopt, [](SimDevice& sim) { sim.inject_fault(SimFault::copy_d2h, 2); });
  INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
  CHECK(out.run.error.empty());
  CHECK(out.comparison.identical);
  CHECK(out.run.unmapped_accesses == 0);
  CHECK(out.run.executor.copy_failures == 2);
  CHECK(out.run.executor.faults == 2);
  CHECK(out.run.executor.swaps == 2);
  CHECK(out.run.executor.budget_exceeded >= 1);
}

TEST_CASE("a copy back the device refuses is tried again, and never loses the data", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  SECTION("once: the prefetch fails, the guard fetches the block late") {
    const Outcome out = run_both(t, p, 3, std::nullopt, [](SimDevice& sim) { sim.inject_fault(SimFault::copy_h2d, 1); });
    INFO("run error: " << out.run.error << "; first mismatch: " << out.comparison.first_mismatch);
    CHECK(out.run.error.empty());
    CHECK(out.comparison.identical);
    CHECK(out.run.unmapped_accesses == 0);
    CHECK(out.run.executor.copy_failures == 1);
    CHECK(out.run.executor.late_fetches == 1);
    CHECK(out.run.executor.prefetches == 2);
  }
  SECTION("three times: the launch cannot run, and says the data are safe on the host") {
    const Outcome out = run_both(t, p, 3, std::nullopt, [](SimDevice& sim) { sim.inject_fault(SimFault::copy_h2d, 3); });
    CHECK_THAT(out.run.error, Catch::Contains("cannot be copied back") && Catch::Contains("safe in host memory"));
    CHECK(out.run.executor.copy_failures == 3);
    CHECK(out.run.unmapped_accesses == 0);
  }
}

TEST_CASE("no pinned host memory for the plan's copies refuses run mode at start", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  const executor::StepProgram program = executor::step_program(t);
  execute::ProgramOptions options;
  options.gpu = "titanv";
  options.prepare_device = [](SimDevice& sim) { sim.inject_fault(SimFault::alloc_pinned, 1); };
  CHECK_THROWS_WITH(execute::run_program(t, program, &p, options),
                    Catch::Contains("cannot pin the") && Catch::Contains("run mode refuses to start"));
  SECTION("a host limit too small for them is refused the same way") {
    auto device = make_sim_device(SimOptions{.profile = "titanv"});
    CachingAllocator allocator(device, AllocatorConfig{});
    executor::ExecutorOptions limited;
    limited.host_limit_bytes = kX / 2;
    CHECK_THROWS_WITH(executor::Executor(allocator, program, executor::schedule_actions(p, t, program), limited),
                      Catch::Contains("pinned host memory") && Catch::Contains("DELTA_HOST_BUDGET"));
  }
}

TEST_CASE("a budget under one page of the device is refused at start, naming the budget", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  const executor::StepProgram program = executor::step_program(t);
  auto device = make_sim_device(SimOptions{.profile = "titanv"});
  CachingAllocator allocator(device, AllocatorConfig{});
  const std::size_t limit = allocator.limit_bytes();
  executor::ExecutorOptions tiny;
  tiny.budget_bytes = 1'000'000;  // under the 2 MiB page
  CHECK_THROWS_WITH(executor::Executor(allocator, program, executor::schedule_actions(p, t, program), tiny),
                    Catch::Contains("budget of 1000000 bytes") && Catch::Contains("under one page"));
  CHECK(allocator.limit_bytes() == limit);  // refused before the allocator's cap was touched
}

// Drives a Rig by hand: each launch shown to the executor, then issued on the sim.
struct HandDriven {
  Rig& rig;
  std::uintptr_t module = 0;
  std::function<Relaunch()> capture;
  void launch(const char* name, std::vector<executor::LaunchRange> ranges, std::uint64_t seed) {
    executor::Launch seen{name, rig.stream, ranges, capture};
    seen.module = module;
    rig.exec.before_launch(seen);
    rig.sim.launch(sim_launch(name, ranges, seed), rig.stream);
    rig.exec.check_invariants();
  }
  static SimLaunch sim_launch(const char* name, const std::vector<executor::LaunchRange>& ranges, std::uint64_t seed) {
    SimLaunch l;
    l.name = name;
    l.duration_ns = 10 * kMs;
    l.seed = seed;
    for (const auto& r : ranges) {
      if (r.read) l.reads.push_back({r.ptr, r.bytes});
      if (r.write) l.writes.push_back({r.ptr, r.bytes});
    }
    return l;
  }
};

TEST_CASE("no device memory for a prefetch puts it off; the guard fetches the block late", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, swap(0, 3, 4));
  Rig rig(t, p);
  HandDriven drive{rig};
  void* x = rig.exec.allocate(kX, rig.stream);
  const auto ptr = reinterpret_cast<DevicePtr>(x);
  drive.launch("produce_x", {{ptr, kX, false, true}}, 7);
  rig.device->synchronize();
  const std::uint64_t before = rig.sim.digest(ptr, kX);
  drive.launch("filler_a", {}, 0);
  void* y = rig.exec.allocate(planner::testing::kY, rig.stream);
  drive.launch("produce_y", {{reinterpret_cast<DevicePtr>(y), planner::testing::kY, false, true}}, 9);
  rig.exec.deallocate(y);
  rig.device->synchronize();  // X's pages are gone by now
  rig.sim.inject_fault(SimFault::create_physical, 1'000'000);
  drive.launch("filler_b", {}, 0);  // the prefetch at op 3 finds no device memory
  CHECK(rig.exec.stats().prefetches == 0);
  CHECK_FALSE(rig.sim.is_mapped(ptr, kX));
  rig.sim.inject_fault(SimFault::create_physical, 0);
  drive.launch("consume_x", {{ptr, kX, true, false}}, 11);
  CHECK(rig.exec.stats().late_fetches == 1);
  rig.exec.end_step();
  rig.device->synchronize();
  CHECK(rig.sim.digest(ptr, kX) == before);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
}

TEST_CASE("a module about to be unloaded has its pending rebuilds done first", "[executor]") {
  const trace::Trace t = planner::testing::swap_trace();
  plan::Plan p = plan_for(t, 1'250'000'000);
  add(p, 1, regeneration(0, 4, {0}));
  Rig rig(t, p);
  HandDriven drive{rig};
  drive.module = 0x5eed;
  bool unloaded = false;
  SimDevice& sim = rig.sim;
  // A copy of a launch, as the LD_PRELOAD route keeps one; it fails once its module is gone.
  auto relaunch_of = [&sim, &unloaded](const char* name, std::vector<executor::LaunchRange> ranges, std::uint64_t seed) {
    return [&sim, &unloaded, name, ranges, seed](std::span<const DevicePtr> ptrs, StreamHandle on) {
      if (unloaded) throw DeviceError(DeviceErrc::invalid_handle, "cuLaunchKernel: its module was unloaded");
      std::vector<executor::LaunchRange> moved = ranges;
      for (std::size_t i = 0; i < moved.size() && i < ptrs.size(); ++i) moved[i].ptr = ptrs[i];
      sim.launch(HandDriven::sim_launch(name, moved, seed), on);
    };
  };
  void* x = rig.exec.allocate(kX, rig.stream);
  const auto ptr = reinterpret_cast<DevicePtr>(x);
  const std::vector<executor::LaunchRange> produce{{ptr, kX, false, true}};
  drive.capture = [&] { return Relaunch(relaunch_of("produce_x", produce, 7)); };
  drive.launch("produce_x", produce, 7);
  drive.capture = {};
  rig.device->synchronize();
  const std::uint64_t before = sim.digest(ptr, kX);
  drive.launch("filler_a", {}, 0);
  void* y = rig.exec.allocate(planner::testing::kY, rig.stream);
  drive.launch("produce_y", {{reinterpret_cast<DevicePtr>(y), planner::testing::kY, false, true}}, 9);
  rig.exec.deallocate(y);

  SECTION("seen before the unload: X is rebuilt while it still can be") {
    rig.exec.before_module_unload(0x5eed);
    unloaded = true;
    CHECK(rig.exec.stats().unload_rebuilds == 1);
    drive.launch("filler_b", {}, 0);
    drive.launch("consume_x", {{ptr, kX, true, false}}, 11);
    rig.exec.end_step();
    rig.device->synchronize();
    CHECK(sim.digest(ptr, kX) == before);
    CHECK(rig.exec.stats().faults == 0);
  }
  SECTION("unseen: the failed replay is reported as lost data, never hidden") {
    unloaded = true;
    drive.launch("filler_b", {}, 0);
    CHECK_THROWS_WITH(drive.launch("consume_x", {{ptr, kX, true, false}}, 11),
                      Catch::Contains("replaying op 0") && Catch::Contains("data are lost"));
    CHECK(rig.exec.stats().faults == 1);
  }
  SECTION("another module unloading changes nothing") {
    rig.exec.before_module_unload(0xbad);
    CHECK(rig.exec.stats().unload_rebuilds == 0);
  }
}
