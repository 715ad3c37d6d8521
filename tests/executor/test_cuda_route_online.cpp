// The online policy behind the GPU launch route, with a fake driver over the sim device
// (fake_driver.hpp): what auto mode's first steps are on a GPU. A launch whose parameter words
// point into a block the policy sent away finds it back on the device when the driver gets the
// call, bytes-equal; a block pinned by the route (an IPC export, an NCCL registration) never
// leaves again; while a stream captures a graph nothing moves, and a capture begun while
// blocks are away brings them back first.
#include "executor/online/online_policy.hpp"
#include "fake_driver.hpp"

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

using namespace delta;
using namespace delta::executor;
using namespace delta::executor::testing;

namespace {

constexpr std::size_t kPage = std::size_t{2} << 20;

struct Rig {
  explicit Rig(std::uint64_t budget)
      : device(make_sim_device(SimOptions{.profile = "titanv", .content = SimContent::bytes})),
        sim(*as_sim(device.get())),
        allocator(device, AllocatorConfig{}),
        policy(allocator, OnlineOptions{.budget_bytes = budget}),
        driver(sim),
        route(policy, FakeDriver::queries()),
        stream(device->create_stream()),
        read(driver.add({"read_one", 1000, {false}})) {}

  DevicePtr allocate(std::uint8_t seed) {
    const auto p = reinterpret_cast<DevicePtr>(policy.allocate(kPage, stream));
    device->synchronize();
    sim.write(p, pattern(seed));
    return p;
  }
  // A kernel reading the block from an interior address (as a view of a tensor is passed):
  // only the policy's block_containing can tell which block the word points into.
  void read_through_route(DevicePtr p, bool packed = false) {
    REQUIRE(driver.launch(route, read, {{p + 4096, kPage - 4096}}, stream, packed) == CUDA_SUCCESS);
    policy.check_invariants();
    route.check_invariants();
  }
  bool bytes_equal(DevicePtr p, std::uint8_t seed) {
    device->synchronize();
    std::vector<std::uint8_t> back(kPage);
    sim.read(p, back);
    return back == pattern(seed);
  }
  static std::vector<std::uint8_t> pattern(std::uint8_t seed) {
    std::vector<std::uint8_t> out(kPage);
    for (std::size_t i = 0; i < kPage; ++i) out[i] = static_cast<std::uint8_t>(seed * 31 + i * 7 + (i >> 11));
    return out;
  }

  std::shared_ptr<Device> device;
  SimDevice& sim;
  CachingAllocator allocator;
  OnlinePolicy policy;
  FakeDriver driver;
  CudaLaunchRoute route;
  StreamHandle stream;
  CUfunction read;
};

}  // namespace

TEST_CASE("through the route, a block the online policy sent away is back before the driver gets the launch",
          "[cuda_route][online]") {
  Rig rig(4 * kPage);  // four blocks of a page fit; eight are made
  std::vector<DevicePtr> ptrs;
  for (std::uint8_t i = 0; i < 8; ++i) {
    ptrs.push_back(rig.allocate(i));
    rig.read_through_route(ptrs.back());
  }
  std::uint64_t found_away = 0;
  for (int round = 0; round < 2; ++round)
    for (std::uint8_t i = 0; i < 8; ++i) {
      rig.device->synchronize();
      found_away += !rig.sim.is_mapped(ptrs[i], kPage);
      rig.read_through_route(ptrs[i], /*packed=*/round == 1);
      REQUIRE(rig.bytes_equal(ptrs[i], i));
    }
  CHECK(found_away >= 8);  // the launches did find blocks away: the guard had work to do
  CHECK(rig.driver.unmapped_at_call == 0);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
  const OnlineStats s = rig.policy.stats();
  CHECK(s.fetches >= 8);
  CHECK(s.budget_exceeded == 0);
  CHECK(rig.allocator.stats().reserved_peak <= 4 * kPage);
  const RouteStats r = rig.route.stats();
  CHECK(r.launches == 24);
  CHECK(r.pointer_words == 24);  // each launch's pointer word, found inside its block; the size words match none
  CHECK(r.refused == 0);
  // A module unloading: the policy never replays, the route forgets the module's functions.
  rig.route.before_unload(rig.driver.module_handle);
  CHECK(rig.route.stats().functions == 0);
  rig.read_through_route(ptrs[0]);
  CHECK(rig.bytes_equal(ptrs[0], 0));
  for (DevicePtr p : ptrs) rig.policy.deallocate(reinterpret_cast<void*>(p));
  rig.policy.check_invariants();
}

TEST_CASE("through the route, a pinned block comes back at once and never leaves under pressure",
          "[cuda_route][online]") {
  Rig rig(4 * kPage);
  const DevicePtr a = rig.allocate(1);
  rig.read_through_route(a);
  std::vector<DevicePtr> others;
  for (std::uint8_t i = 0; i < 4; ++i) {  // a, the stalest, leaves
    others.push_back(rig.allocate(10 + i));
    rig.read_through_route(others.back());
  }
  rig.device->synchronize();
  REQUIRE_FALSE(rig.sim.is_mapped(a, kPage));
  rig.route.pin(a + 100);  // cuIpcGetMemHandle on an interior address
  CHECK(rig.sim.is_mapped(a, kPage));  // back before the export is made, not at a's next launch
  CHECK(rig.bytes_equal(a, 1));
  rig.policy.check_invariants();
  const std::uint64_t evictions = rig.policy.stats().evictions;
  // Pressure, a stalest and all: a stays.
  for (int round = 0; round < 3; ++round) {
    others.push_back(rig.allocate(static_cast<std::uint8_t>(20 + round)));
    for (DevicePtr p : others) {
      rig.read_through_route(p);
      REQUIRE(rig.sim.is_mapped(a, kPage));
    }
  }
  CHECK(rig.policy.stats().evictions > evictions + 5);  // the others kept leaving
  CHECK(rig.bytes_equal(a, 1));
  // Handed over to a plan and back (auto mode): the pin holds through the adoption, whose
  // evictions bring the policy back within its budget.
  rig.route.pin(a + 200);  // exported again: one range still
  rig.policy.check_invariants();
  rig.policy.adopt(rig.policy.hand_over());
  rig.policy.check_invariants();
  for (DevicePtr p : others) {
    rig.read_through_route(p);
    REQUIRE(rig.sim.is_mapped(a, kPage));
  }
  CHECK(rig.bytes_equal(a, 1));
  CHECK(rig.route.stats().pins == 2);
  CHECK(rig.driver.unmapped_at_call == 0);
}

TEST_CASE("through the route, a graph capture brings every block back first, and nothing moves until it ends",
          "[cuda_route][online][capture]") {
  Rig rig(4 * kPage);
  std::vector<DevicePtr> ptrs;
  for (std::uint8_t i = 0; i < 6; ++i) {
    ptrs.push_back(rig.allocate(i));
    rig.read_through_route(ptrs.back());
  }
  rig.device->synchronize();
  std::size_t away = 0;
  for (DevicePtr p : ptrs) away += !rig.sim.is_mapped(p, kPage);
  REQUIRE(away >= 2);

  rig.route.before_capture();  // cuStreamBeginCapture, where device calls are still legal
  rig.route.before_capture();  // a second stream captures too (nested)
  for (std::uint8_t i = 0; i < 6; ++i) {
    CHECK(rig.sim.is_mapped(ptrs[i], kPage));
    CHECK(rig.bytes_equal(ptrs[i], i));
  }
  rig.policy.check_invariants();  // its rule: every block resident while a graph is captured
  const SimCounters at_begin = rig.sim.counters();
  const OnlineStats stats_at_begin = rig.policy.stats();
  // Launches on the first three (captured: the route pins them for good), a free and an
  // allocation served from the cache: no copy, no map or unmap, no eviction.
  for (int round = 0; round < 2; ++round)
    for (std::size_t i = 0; i < 3; ++i) rig.read_through_route(ptrs[i]);
  rig.route.after_capture();  // one of two ends: still quiet
  rig.policy.deallocate(reinterpret_cast<void*>(ptrs[5]));
  ptrs[5] = rig.allocate(5);
  rig.read_through_route(ptrs[2]);
  rig.device->synchronize();
  const SimCounters in_capture = rig.sim.counters();
  CHECK(in_capture.maps == at_begin.maps);
  CHECK(in_capture.unmaps == at_begin.unmaps);
  CHECK(in_capture.bytes_d2h == at_begin.bytes_d2h);
  CHECK(in_capture.bytes_h2d == at_begin.bytes_h2d);
  CHECK(rig.policy.stats().evictions == stats_at_begin.evictions);
  CHECK(rig.policy.stats().prefetches == stats_at_begin.prefetches);
  // More than the budget meanwhile (six blocks back where four fit, and three more, past the
  // slack the lifted limit left): served, counted, nothing evicted for them.
  std::vector<DevicePtr> extra;
  for (std::uint8_t i = 0; i < 3; ++i) extra.push_back(rig.allocate(6 + i));
  CHECK(rig.policy.stats().evictions == stats_at_begin.evictions);
  CHECK(rig.policy.stats().budget_exceeded > stats_at_begin.budget_exceeded);
  CHECK(rig.allocator.stats().reserved_bytes >= 9 * kPage);
  rig.route.after_capture();

  // The capture over, the step's end brings the policy back within its budget; the blocks the
  // captured launches touched stay (the graph may replay at those addresses at any time).
  rig.policy.end_step();
  rig.policy.check_invariants();
  CHECK(rig.allocator.stats().reserved_bytes <= 4 * kPage);
  for (int round = 0; round < 2; ++round)
    for (DevicePtr p : {ptrs[3], ptrs[4], ptrs[5], extra[0], extra[1], extra[2]}) {
      rig.read_through_route(p);
      rig.device->synchronize();
      for (std::size_t i = 0; i < 3; ++i) REQUIRE(rig.sim.is_mapped(ptrs[i], kPage));
    }
  CHECK(rig.policy.stats().evictions > stats_at_begin.evictions);
  for (std::uint8_t i = 0; i < 6; ++i) {
    rig.read_through_route(ptrs[i]);  // those away come back for it
    CHECK(rig.bytes_equal(ptrs[i], i));
  }
  for (std::uint8_t i = 0; i < 3; ++i) {
    rig.read_through_route(extra[i]);
    CHECK(rig.bytes_equal(extra[i], static_cast<std::uint8_t>(6 + i)));
  }
  CHECK(rig.route.stats().pins == 0);  // capture pins are the route's own, not exports
  CHECK(rig.driver.unmapped_at_call == 0);
  CHECK(rig.sim.counters().unmapped_accesses == 0);
}
