// Auto mode behind the GPU launch route, with a fake driver over the sim device
// (tests/executor/fake_driver.hpp): what DELTA_MODE=auto runs on a GPU. A small program (W, a
// persistent block; X made by op 0 and read by op 4; Y made by op 2; peak above the budget)
// runs its first steps under the online policy while it is recorded; then a plan written by
// hand, put in the plan cache under the program's key, takes over. Through the route: what op
// 4 reads is what op 0 wrote in every step, and the driver never gets a launch on unmapped
// memory; a module unloading rebuilds what waits for a replay through it; a pin outlives the
// hand-overs; a graph capture hands a planned step to the online policy, nothing moves until
// it ends, and no plan takes over meanwhile.
#include "auto_route_rig.hpp"

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::autorig;

TEST_CASE("auto mode behind the route: online steps recorded, then a plan's replays through the driver, bytes equal",
          "[autopilot][cuda_route]") {
  AutoRig rig;
  const auto digests = rig.run(6, regeneration(0, 4, {0}));
  check_bytes_equal(digests);
  CHECK(rig.driver.unmapped_at_call == 0);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  const autopilot::AutoReport r = rig.pilot.report();
  CHECK(r.plan_from == "cache");
  CHECK(r.planned_after == 3);
  CHECK(r.plan_switches == 1);
  CHECK(r.program_changes == 0);
  CHECK(r.online.evictions >= 3);  // X left for Y in each online step
  CHECK(r.online.budget_exceeded == 0);
  REQUIRE(r.executor);
  CHECK(r.executor->regenerations == 3);  // steps 4, 5, 6
  CHECK(r.executor->replayed_launches == 3);
  CHECK(r.executor->divergences == 0);
  CHECK(rig.driver.calls == 6 * 5 + 3);  // the replays reached the driver
  CHECK(rig.route.stats().unreadable == 0);
  // The recording holds the program's launches and nothing of DELTA's: the online policy's
  // copies out and back ran in its entry points (OwnWorkScope), and are not ops.
  REQUIRE(rig.recorded.ops.size() == 10);
  for (const trace::Op& op : rig.recorded.ops) CHECK(op.kind == trace::OpKind::kernel);
}

TEST_CASE("auto mode behind the route: a module unloading under the plan rebuilds what waits for a replay",
          "[autopilot][cuda_route]") {
  AutoRig rig;
  Hooks hooks;
  hooks.after_op = [&](int step, int op) {
    if (step == 5 && op == 2) rig.route.before_unload(rig.driver.module_handle);  // X dropped, its producer's module going
  };
  check_bytes_equal(rig.run(6, regeneration(0, 4, {0}), hooks));
  const autopilot::AutoReport r = rig.pilot.report();
  REQUIRE(r.executor);
  CHECK(r.executor->unload_rebuilds == 1);
  CHECK(r.executor->regenerations == 3);
  CHECK(r.executor->replayed_launches == 3);  // step 5's replay ran at the unload, not at op 4
  CHECK(rig.driver.unmapped_at_call == 0);
}

TEST_CASE("auto mode behind the route: a pin outlives the hand-overs, online to plan and back", "[autopilot][cuda_route]") {
  AutoRig rig;
  std::uint64_t x_checked = 0;
  bool pinned = false;
  Hooks hooks;
  hooks.after_op = [&](int step, int op) {
    if (step == 2 && op == 0) {
      rig.route.pin(rig.x + 4096);  // X exported (cuIpcGetMemHandle): X and blocks later at its address stay
      pinned = true;
    }
    if (step == 5 && op == 1) rig.launch(rig.filler_b, {});  // a launch the plan's step does not have there
    if (pinned) {
      rig.device->synchronize();
      REQUIRE(rig.sim.is_mapped(rig.x, kX));
      x_checked++;
    }
  };
  check_bytes_equal(rig.run(7, swap(0, 3, 4), hooks));
  CHECK(x_checked >= 5 * 5);  // X is reallocated at its address every step, and stays every time
  const autopilot::AutoReport r = rig.pilot.report();
  CHECK(r.plan_switches == 2);    // after step 3, and after step 6 (step 5's shape, with its stray launch, has no plan)
  CHECK(r.program_changes == 1);  // step 5 strayed: back to the online policy mid-step
  REQUIRE(r.executor);
  CHECK(r.executor->swaps == 0);
  CHECK(r.executor->pinned_skips == 1);  // step 7's executor (a new one since the hand-back): X's eviction not done
  CHECK(rig.route.stats().pins == 1);
  CHECK(rig.driver.unmapped_at_call == 0);
}

TEST_CASE("auto mode behind the route: a graph capture hands a planned step to the online policy; nothing moves until "
          "it ends, and no plan takes over meanwhile",
          "[autopilot][cuda_route][capture]") {
  AutoRig rig;
  SimCounters at_begin{}, at_second{};
  std::uint32_t switches_in_step_7 = 0;
  autopilot::AutoReport report_at_begin;
  bool x_back_at_begin = false;
  Hooks hooks;
  hooks.before_op = [&](int step, int op) {
    // Step 5, op 2: under the plan, X was dropped after op 0.
    if (step == 5 && op == 2) {
      rig.device->synchronize();
      REQUIRE_FALSE(rig.sim.is_mapped(rig.x, kX));
      rig.route.before_capture();
      x_back_at_begin = rig.sim.is_mapped(rig.x, kX);
      rig.device->synchronize();
      at_begin = rig.sim.counters();
      report_at_begin = rig.pilot.report();
    }
    // A second capture spans the boundary after step 6: no switch there, and nothing moves.
    if (step == 6 && op == 3) {
      rig.route.before_capture();
      rig.device->synchronize();
      at_second = rig.sim.counters();
    }
    if (step == 7 && op == 0) switches_in_step_7 = rig.pilot.report().plan_switches;
  };
  hooks.after_op = [&](int step, int op) {
    if (step == 5 && op == 3) {
      rig.device->synchronize();
      const SimCounters now = rig.sim.counters();
      CHECK(now.bytes_d2h == at_begin.bytes_d2h);
      CHECK(now.bytes_h2d == at_begin.bytes_h2d);
      CHECK(now.unmaps == at_begin.unmaps);
      CHECK(rig.pilot.report().online.evictions == report_at_begin.online.evictions);
      rig.route.after_capture();
    }
    if (step == 7 && op == 1) {
      rig.device->synchronize();
      const SimCounters now = rig.sim.counters();
      CHECK(now.bytes_d2h == at_second.bytes_d2h);
      CHECK(now.unmaps == at_second.unmaps);
      rig.route.after_capture();
    }
  };
  check_bytes_equal(rig.run(9, regeneration(0, 4, {0}), hooks));
  CHECK(x_back_at_begin);  // rebuilt by the executor's hand-over, before the capture began
  const autopilot::AutoReport r = rig.pilot.report();
  // After step 3; after step 5 (the capture over); not after step 6 (a capture active); after
  // step 7 (it ended in step 7).
  CHECK(switches_in_step_7 == 2);
  CHECK(r.plan_switches == 3);
  CHECK(r.program_changes == 0);  // a capture is not the program straying
  REQUIRE(r.executor);
  CHECK(r.executor->divergences == 0);
  CHECK(rig.driver.unmapped_at_call == 0);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
}

TEST_CASE("auto mode behind the route: a recording that cannot start at a boundary leaves the new shape unplanned, "
          "and the run goes on",
          "[autopilot][cuda_route]") {
  AutoRig rig;
  rig.later_recordings_fail = true;
  Hooks hooks;
  hooks.after_op = [&](int step, int op) {
    if (step == 5 && op == 1) rig.launch(rig.filler_b, {});  // a new shape: recorded, were it possible
  };
  check_bytes_equal(rig.run(7, regeneration(0, 4, {0}), hooks));
  CHECK(rig.recordings == 2);  // the first, and the one refused after step 5
  const autopilot::AutoReport r = rig.pilot.report();
  CHECK(r.program_changes == 1);
  CHECK(r.plan_switches == 2);  // the known shape's plan again after step 6
  CHECK(r.shapes.size() == 1);
  CHECK(rig.driver.unmapped_at_call == 0);
}
