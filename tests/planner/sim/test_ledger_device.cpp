// The device under the planner's allocator ledger (planner/sim/ledger_device.hpp) keeps only
// the books. It must refuse what a driver refuses, and the caching allocator on it must do
// exactly what it does on the sim device, whose verdicts it replaced.
#include "sim/ledger_device.hpp"

#include <delta/allocator.hpp>
#include <delta/device.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace delta;

namespace {

constexpr std::size_t kPage = 2ull << 20;

DeviceErrc error_of(const auto& call) {
  try {
    call();
  } catch (const DeviceError& e) {
    return e.code();
  }
  FAIL("no DeviceError");
  return DeviceErrc::driver_error;
}

}  // namespace

TEST_CASE("the ledger device refuses what a driver refuses", "[ledger_device]") {
  auto device = planner::make_ledger_device("h200");
  const MemInfo info = device->mem_info();
  CHECK(info.total_bytes == gpu_profile("h200").memory_bytes);
  CHECK(device->granularity() == kPage);

  const DevicePtr va = device->reserve(4 * kPage);
  const PhysHandle two = device->create_physical(2 * kPage);
  const PhysHandle one = device->create_physical(kPage);
  CHECK(device->mem_info().free_bytes == info.total_bytes - 3 * kPage);

  CHECK(error_of([&] { device->reserve(kPage + 1); }) == DeviceErrc::invalid_value);
  CHECK(error_of([&] { device->create_physical(info.total_bytes); }) == DeviceErrc::out_of_memory);
  CHECK(error_of([&] { device->map(va, kPage, two); }) == DeviceErrc::invalid_value);  // not its whole handle
  CHECK(error_of([&] { device->map(va + 3 * kPage, 2 * kPage, two); }) == DeviceErrc::invalid_value);  // past the end
  CHECK(error_of([&] { device->map(va, kPage, 99); }) == DeviceErrc::invalid_handle);

  device->map(va + kPage, 2 * kPage, two);
  CHECK(error_of([&] { device->map(va + 2 * kPage, kPage, one); }) == DeviceErrc::already_mapped);  // inside it
  device->map(va, kPage, one);
  CHECK(error_of([&] { device->unmap(va + 2 * kPage, kPage); }) == DeviceErrc::not_mapped);  // starts none
  CHECK(error_of([&] { device->unmap(va + kPage, kPage); }) == DeviceErrc::invalid_value);   // part of one
  CHECK(error_of([&] { device->release_reservation(va, 4 * kPage); }) == DeviceErrc::invalid_value);  // live maps

  // A handle released while mapped lives on until its unmap, as with the driver.
  device->release_physical(two);
  CHECK(error_of([&] { device->release_physical(two); }) == DeviceErrc::invalid_handle);
  CHECK(device->mem_info().free_bytes == info.total_bytes - 3 * kPage);
  device->unmap(va + kPage, 2 * kPage);
  CHECK(device->mem_info().free_bytes == info.total_bytes - kPage);
  CHECK(error_of([&] { device->unmap(va + kPage, 2 * kPage); }) == DeviceErrc::not_mapped);
  device->map(va + kPage, kPage, device->create_physical(kPage));  // the pages are free again

  CHECK(error_of([&] { device->copy_d2d_async(va, va, 8, 0); }) == DeviceErrc::invalid_value);
  CHECK(error_of([&] { device->alloc_pinned(8); }) == DeviceErrc::invalid_value);
}

TEST_CASE("with the simulation's clock, the ledger device's events complete with the work before them", "[ledger_device]") {
  // A reclaimed page's idle fence holds the host until the device has done the work queued
  // before it, as in a run; where the simulated host runs behind that, nothing waits.
  struct Clock final : planner::LedgerClock {
    std::int64_t device = 0, host = 0;
    std::int64_t device_done_ns() const override { return device; }
    std::int64_t host_ns() const override { return host; }
    void host_waits_until(std::int64_t t) override { host = std::max(host, t); }
  } clock;
  planner::LedgerClockSlot slot;
  auto device = planner::make_ledger_device("h200", &slot);
  const EventHandle before = device->create_event(), fence = device->create_event();
  device->record_event(before, 0);  // no clock yet: complete at once
  CHECK(device->query_event(before));
  slot.set(&clock);
  clock.device = 5'000;  // the work queued so far ends at 5 us
  device->record_event(fence, 0);
  CHECK(device->query_event(before));
  CHECK_FALSE(device->query_event(fence));  // the host, at 0, is ahead of it
  device->synchronize_event(before);
  CHECK(clock.host == 0);
  device->synchronize_event(fence);
  CHECK(clock.host == 5'000);
  CHECK(device->query_event(fence));
  clock.device = 9'000;
  device->synchronize_stream(0);  // every stream's work, in the simulation's one order
  CHECK(clock.host == 9'000);
  // The next step's clock starts again: what the last step recorded has completed.
  clock.device = 10'000;
  device->record_event(fence, 0);
  slot.set(&clock);
  clock.device = clock.host = 0;
  CHECK(device->query_event(fence));
  device->synchronize_event(fence);
  CHECK(clock.host == 0);
  CHECK(error_of([&] { device->synchronize_event(0x7fff'ffff); }) == DeviceErrc::invalid_handle);
}

TEST_CASE("the caching allocator does the same on the ledger device as on the sim device", "[ledger_device]") {
  SimOptions options;
  options.content = SimContent::none;
  AllocatorConfig config;
  config.hard_limit_bytes = 600 * kPage;
  CachingAllocator on_sim(make_sim_device(options), config);
  CachingAllocator on_ledger(planner::make_ledger_device("h200"), config);

  struct Live {
    void* sim;
    void* ledger;
    bool own_pages;
    std::size_t pages_away;
  };
  std::vector<Live> live;
  std::mt19937_64 random(20261205);
  std::size_t refused = 0, placed = 0;
  for (int step = 0; step < 6000; ++step) {
    const unsigned what = random() % 10;
    if (what < 5 || live.empty()) {
      // Small blocks, large ones and blocks of several pages, some on pages of their own.
      const std::size_t sizes[] = {512, 4096, 1u << 20, 3u << 20, 20u << 20, 90u << 20};
      const std::size_t size = sizes[random() % 6] + random() % 4096;
      const Placement placement{.own_pages = random() % 3 == 0};
      void* sim = nullptr;
      void* ledger = nullptr;
      bool sim_refused = false, ledger_refused = false;
      try { sim = on_sim.allocate(size, 0, placement); } catch (const OutOfMemoryError&) { sim_refused = true; }
      try { ledger = on_ledger.allocate(size, 0, placement); } catch (const OutOfMemoryError&) { ledger_refused = true; }
      REQUIRE(sim_refused == ledger_refused);
      if (sim_refused) {
        ++refused;
        continue;
      }
      ++placed;
      REQUIRE(sim == ledger);  // the same address
      live.push_back({sim, ledger, placement.own_pages, 0});
    } else if (what < 8) {
      const std::size_t i = random() % live.size();
      on_sim.deallocate(live[i].sim);
      on_ledger.deallocate(live[i].ledger);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      // Residency: an own-pages block's tail away, or back where it was away.
      Live& block = live[random() % live.size()];
      if (!block.own_pages) continue;
      const std::size_t pages = *on_sim.block_size(block.sim) / kPage;
      if (block.pages_away == 0) {
        const std::size_t away = 1 + random() % pages;
        REQUIRE(on_sim.unmap_pages(block.sim, (pages - away) * kPage, away * kPage) ==
                on_ledger.unmap_pages(block.ledger, (pages - away) * kPage, away * kPage));
        block.pages_away = away;
      } else {
        const std::size_t offset = (pages - block.pages_away) * kPage;
        bool sim_refused = false, ledger_refused = false;
        try { on_sim.map_pages(block.sim, offset, block.pages_away * kPage); } catch (const OutOfMemoryError&) { sim_refused = true; }
        try { on_ledger.map_pages(block.ledger, offset, block.pages_away * kPage); } catch (const OutOfMemoryError&) { ledger_refused = true; }
        REQUIRE(sim_refused == ledger_refused);
        if (!sim_refused) block.pages_away = 0;
      }
    }
    const AllocatorStats a = on_sim.stats(), b = on_ledger.stats();
    REQUIRE(a.reserved_bytes == b.reserved_bytes);
    REQUIRE(a.reserved_peak == b.reserved_peak);
    REQUIRE(a.allocated_bytes == b.allocated_bytes);
    REQUIRE(a.cached_bytes == b.cached_bytes);
    if (step % 500 == 0) {
      on_sim.check_invariants();
      on_ledger.check_invariants();
    }
  }
  // The sequence went where it matters: blocks placed, and refused at the limit.
  CHECK(placed > 1000);
  CHECK(refused > 10);
  on_ledger.check_invariants();
  for (const Live& block : live) {
    on_sim.deallocate(block.sim);
    on_ledger.deallocate(block.ledger);
  }
  on_ledger.empty_cache();
  CHECK(on_ledger.stats().reserved_bytes == on_ledger.stats().spare_bytes);
}
