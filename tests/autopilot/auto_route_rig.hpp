// The rig of test_autopilot_route.cpp: a small program driven through the GPU launch route
// (tests/executor/fake_driver.hpp) into auto mode on the sim device. W (256 MiB) is held from
// the start; each step allocates X (1 GiB), which op 0 writes from W and op 4 reads, and Y
// (256 MiB), which op 2 writes; W + X + Y is above the budget, so X must leave for Y. Steps 1
// and 2 run under the online policy and are recorded; a plan written by hand for step 2 as
// recorded is then put in the plan cache under the program's key, and takes over after step 3.
#pragma once

#include "autopilot/autopilot.hpp"
#include "autopilot/plan_cache.hpp"
#include "autopilot/steps/step_trace.hpp"
#include "fake_driver.hpp"
#include "hand_plans.hpp"
#include "profiler/sources/sim_source.hpp"

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <unistd.h>

namespace delta::autorig {

using namespace delta::executor;
using namespace delta::executor::testing;

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

inline void check_bytes_equal(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& digests) {
  for (const auto& [written, read] : digests) {
    CHECK(written != 0);
    CHECK(read == written);                   // what op 4 reads is what op 0 wrote, after X's trip
    CHECK(written == digests.front().first);  // and the same every step (W unchanged)
  }
}

using planner::testing::regeneration;
using planner::testing::swap;

}  // namespace delta::autorig
