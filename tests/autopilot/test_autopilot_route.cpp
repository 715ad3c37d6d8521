// Auto mode behind the GPU launch route, with a fake driver over the sim device
// (tests/executor/fake_driver.hpp): what DELTA_MODE=auto runs on a GPU. A small program (W, a
// persistent block; X made by op 0 and read by op 4; Y made by op 2; peak above the budget)
// runs its first steps under the online policy while it is recorded; then a plan written by
// hand, put in the plan cache under the program's key, takes over. Through the route: what op
// 4 reads is what op 0 wrote in every step, and the driver never gets a launch on unmapped
// memory; a module unloading rebuilds what waits for a replay through it; a pin outlives the
// hand-overs; a graph capture hands a planned step to the online policy, nothing moves until
// it ends, and no plan takes over meanwhile.
#include "autopilot/autopilot.hpp"
#include "autopilot/plan_cache.hpp"
#include "autopilot/step_trace.hpp"
#include "fake_driver.hpp"
#include "hand_plans.hpp"
#include "profiler/sources/sim_source.hpp"

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <unistd.h>

using namespace delta;
using namespace delta::executor;
using namespace delta::executor::testing;

namespace {

constexpr std::uint64_t kMiB = 1 << 20;
constexpr std::uint64_t kW = 256 * kMiB, kX = 1024 * kMiB, kY = 256 * kMiB;
constexpr std::uint64_t kBudget = 1400 * kMiB;  // W + X + Y = 1536 MiB: X must leave for Y
constexpr std::uint64_t kMs = 1'000'000;

struct Hooks {
  std::function<void(int step, int op)> before_op, after_op;
};

struct AutoRig {
  explicit AutoRig(std::uint32_t record_iterations = 4)
      : device(make_sim_device(SimOptions{.profile = "titanv", .content = SimContent::digest})),
        sim(*as_sim(device.get())),
        allocator(device, AllocatorConfig{}),
        cache_dir((std::filesystem::temp_directory_path() /
                   ("delta-auto-route-" + std::to_string(::getpid()) + "-" + std::to_string(++runs)))
                      .string()),
        pilot(allocator, options(record_iterations), recording()),
        driver(sim),
        route(pilot, FakeDriver::queries()),
        stream(device->create_stream()) {
    produce_x = driver.add({"produce_x", 10 * kMs, {false, true}});
    filler_a = driver.add({"filler_a", 150 * kMs, {}});
    produce_y = driver.add({"produce_y", 100 * kMs, {true}});
    filler_b = driver.add({"filler_b", 150 * kMs, {}});
    consume_x = driver.add({"consume_x", 10 * kMs, {false}});
    w = reinterpret_cast<DevicePtr>(pilot.allocate(kW, stream));
  }
  ~AutoRig() { std::filesystem::remove_all(cache_dir); }

  autopilot::AutoOptions options(std::uint32_t record_iterations) {
    autopilot::AutoOptions o;
    o.budget_bytes = kBudget;
    o.gpu = "titanv";
    o.record_iterations = record_iterations;
    o.wait_for_plan = true;
    o.use_cache = true;
    o.cache_dir = cache_dir;
    o.clock = [this] { return sim.now_ns(); };
    return o;
  }
  autopilot::AutoPilot::RecordingFactory recording() {
    return [this](std::uint32_t iterations) {
      if (recordings++ > 0 && later_recordings_fail)
        throw std::runtime_error("CUPTI is held by another subscriber (a profiler started meanwhile)");
      profiler::RecorderOptions ro;
      ro.iterations = iterations;
      ro.first_detection_at = static_cast<std::size_t>(-1);
      autopilot::AutoPilot::Recording r;
      r.recorder = std::make_unique<profiler::Recorder>(ro, profiler::sim_clock(sim));
      r.recorder->set_gpu({"titanv", "titanv", sim.mem_info().total_bytes});
      r.source = std::make_unique<profiler::SimActivitySource>(sim, *r.recorder);
      recorder = r.recorder.get();
      return r;
    };
  }

  void launch(CUfunction f, const std::vector<FakeArg>& args) {
    REQUIRE(driver.launch(route, f, args, stream) == CUDA_SUCCESS);
  }
  std::uint64_t digest_of_x() {
    const SimRange range{x, kX};
    return sim.fingerprint(std::span(&range, 1), stream).at(0);  // in stream order, not observed
  }

  // One step of the program; returns X's digest after op 0 and as op 4 reads it.
  std::pair<std::uint64_t, std::uint64_t> step(int s, const Hooks& hooks = {}) {
    std::pair<std::uint64_t, std::uint64_t> d;
    auto op = [&](int k, const std::function<void()>& body) {
      if (hooks.before_op) hooks.before_op(s, k);
      body();
      if (hooks.after_op) hooks.after_op(s, k);
      pilot.check_invariants();
      route.check_invariants();
    };
    x = reinterpret_cast<DevicePtr>(pilot.allocate(kX, stream));
    op(0, [&] {
      launch(produce_x, {{w, kW}, {x, kX}});
      d.first = digest_of_x();
    });
    op(1, [&] { launch(filler_a, {}); });
    y = reinterpret_cast<DevicePtr>(pilot.allocate(kY, stream));
    op(2, [&] { launch(produce_y, {{y, kY}}); });
    pilot.deallocate(reinterpret_cast<void*>(y));
    op(3, [&] { launch(filler_b, {}); });
    op(4, [&] {
      launch(consume_x, {{x, kX}});
      d.second = digest_of_x();
    });
    pilot.deallocate(reinterpret_cast<void*>(x));
    pilot.end_step();
    pilot.check_invariants();
    return d;
  }

  // Steps 1 and 2 online, recorded; then `plan_x` (X's interval in a plan written by hand for
  // step 2 as recorded) put in the plan cache under the program's key: it takes over after
  // step 3. Returns the digests of every step run.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> run(int steps, const plan::Interval& plan_x,
                                                          const Hooks& hooks = {}) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> digests;
    for (int s = 1; s <= steps; ++s) {
      digests.push_back(step(s, hooks));
      if (s == 2) cache_plan(plan_x);
    }
    return digests;
  }
  void cache_plan(const plan::Interval& plan_x) {
    const std::string key = pilot.report().cache_key;  // looked up after step 1, in vain
    REQUIRE_FALSE(key.empty());
    recorded = recorder->snapshot();
    trace::Trace step = autopilot::planning_step(recorded);
    REQUIRE(step.ops.size() == 5);
    plan::Plan p = planner::testing::plan_for(step, kBudget);
    p.predicted.discard_copies = true;  // as the executor runs (AutoOptions::copy_discards)
    for (const trace::Block& b : step.blocks)
      if (b.size == kX) p.decisions.push_back({b.id, {plan_x}});
    REQUIRE(p.decisions.size() == 1);
    autopilot::PlanCache(cache_dir).store(key, {p, step});
  }

  static inline int runs = 0;
  std::shared_ptr<Device> device;
  SimDevice& sim;
  CachingAllocator allocator;
  std::string cache_dir;
  profiler::Recorder* recorder = nullptr;
  int recordings = 0;
  bool later_recordings_fail = false;  // as CUPTI taken by a profiler after auto mode started
  trace::Trace recorded;  // as cache_plan() saw it
  autopilot::AutoPilot pilot;
  FakeDriver driver;
  CudaLaunchRoute route;
  StreamHandle stream;
  CUfunction produce_x{}, filler_a{}, produce_y{}, filler_b{}, consume_x{};
  DevicePtr w = 0, x = 0, y = 0;
};

void check_bytes_equal(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& digests) {
  for (const auto& [written, read] : digests) {
    CHECK(written != 0);
    CHECK(read == written);                   // what op 4 reads is what op 0 wrote, after X's trip
    CHECK(written == digests.front().first);  // and the same every step (W unchanged)
  }
}

using planner::testing::regeneration;
using planner::testing::swap;

}  // namespace

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
