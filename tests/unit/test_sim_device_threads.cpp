// Many host threads using one sim device at once: every VMM, copy, stream and event call must
// stay consistent (run this file under -DDELTA_SANITIZE=thread as well).
#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using namespace delta;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;

std::shared_ptr<SimDevice> make_sim(std::size_t capacity) {
  SimOptions options;
  options.capacity_bytes = capacity;
  return std::dynamic_pointer_cast<SimDevice>(make_sim_device(options));
}

}  // namespace

TEST_CASE("threads create, map, write, copy, unmap and release concurrently", "[sim][threads]") {
  constexpr int kThreads = 8;
  constexpr int kRounds = 60;
  // Room for every thread's two handles at once, so no round can run out of memory.
  auto device = make_sim(kThreads * 3 * kPage);
  std::atomic<int> failures{0};
  std::vector<std::string> first_failure(kThreads);

  auto worker = [&](int id) {
    try {
      const StreamHandle stream = device->create_stream();
      const EventHandle event = device->create_event();
      // One stable address per thread; the physical handle behind it changes every round.
      const DevicePtr va = device->reserve(2 * kPage);
      std::vector<std::uint8_t> pattern(64 * 1024), back(pattern.size());
      for (int round = 0; round < kRounds; ++round) {
        const PhysHandle a = device->create_physical(kPage);
        const PhysHandle b = device->create_physical(kPage);
        device->map(va, kPage, a);
        device->map(va + kPage, kPage, b);
        for (std::size_t i = 0; i < pattern.size(); ++i) {
          pattern[i] = static_cast<std::uint8_t>(id * 37 + round * 11 + i);
        }
        // Straddle the two handles, then move the bytes around on the device and back.
        const DevicePtr at = va + kPage - pattern.size() / 2;
        device->copy_h2d_async(at, pattern.data(), pattern.size(), stream);
        device->copy_d2d_async(va, at, pattern.size(), stream);
        device->record_event(event, stream);
        device->stream_wait_event(kPerThreadStream, event);
        device->copy_d2h_async(back.data(), va, back.size(), kPerThreadStream);
        device->synchronize_event(event);
        if (back != pattern) throw std::runtime_error("bytes differ in round " + std::to_string(round));
        device->launch(SimLaunch{"k", 100, {{va, kPage}}, {{va + kPage, kPage}}}, stream);
        (void)device->query_event(event);
        (void)device->mem_info();
        (void)device->is_mapped(va, 2 * kPage);
        // The kernel and the copy back may still run: unmapping under them is a hazard.
        device->synchronize_stream(stream);
        device->synchronize_stream(kPerThreadStream);
        // Half the rounds release before unmapping, exercising the deferred free.
        if (round % 2 == 0) device->release_physical(a);
        device->unmap(va, kPage);
        device->unmap(va + kPage, kPage);
        if (round % 2 != 0) device->release_physical(a);
        device->release_physical(b);
      }
      device->synchronize_stream(stream);
      device->destroy_stream(stream);
      device->destroy_event(event);
      device->release_reservation(va, 2 * kPage);
    } catch (const std::exception& error) {
      first_failure[id] = error.what();
      failures++;
    }
  };

  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (auto& thread : threads) thread.join();

  for (int id = 0; id < kThreads; ++id) {
    INFO("thread " << id);
    CHECK(first_failure[id].empty());
  }
  CHECK(failures == 0);
  const SimCounters counters = device->counters();
  CHECK(counters.maps == kThreads * kRounds * 2);
  CHECK(counters.unmaps == counters.maps);
  CHECK(counters.physical_creates == kThreads * kRounds * 2);
  CHECK(counters.physical_releases == counters.physical_creates);
  CHECK(counters.physical_bytes_in_use == 0);
  CHECK(counters.physical_bytes_peak <= kThreads * 2 * kPage);
  CHECK(counters.kernels == kThreads * kRounds);
  CHECK(counters.bytes_h2d == kThreads * kRounds * 64 * 1024);
  CHECK(device->mem_info().free_bytes == device->mem_info().total_bytes);
}

TEST_CASE("threads racing for the last bytes never overcommit", "[sim][threads]") {
  constexpr int kThreads = 6;
  constexpr std::size_t kCapacityPages = 10;
  auto device = make_sim(kCapacityPages * kPage);
  std::atomic<int> out_of_memory{0};
  std::atomic<std::size_t> max_seen{0};
  std::atomic<int> other_errors{0};

  auto worker = [&] {
    for (int round = 0; round < 200; ++round) {
      try {
        const PhysHandle handle = device->create_physical(3 * kPage);
        const std::size_t in_use = device->counters().physical_bytes_in_use;
        std::size_t seen = max_seen.load();
        while (in_use > seen && !max_seen.compare_exchange_weak(seen, in_use)) {
        }
        device->release_physical(handle);
      } catch (const DeviceError& error) {
        if (error.code() == DeviceErrc::out_of_memory) {
          out_of_memory++;
        } else {
          other_errors++;
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker);
  for (auto& thread : threads) thread.join();

  CHECK(other_errors == 0);
  CHECK(max_seen.load() <= kCapacityPages * kPage);
  CHECK(device->counters().physical_bytes_peak <= kCapacityPages * kPage);
  CHECK(device->counters().physical_bytes_in_use == 0);
  CHECK(device->counters().physical_creates + out_of_memory == kThreads * 200);
}

TEST_CASE("threads launch with a hook set that maps, launches and unmaps", "[sim][threads][hook]") {
  constexpr int kThreads = 8;
  constexpr int kLaunches = 200;
  auto device = make_sim(kThreads * 2 * kPage);
  std::atomic<int> hook_calls{0}, nested{0};
  std::atomic<int> failures{0};
  std::vector<std::string> first_failure(kThreads);
  // The hook makes each kernel's block resident on its thread's stream and, every fourth
  // launch, replays a producer kernel first (a launch from inside the hook).
  device->set_launch_hook([&](const SimLaunch& launch, StreamHandle stream) {
    hook_calls++;
    const SimRange& block = launch.reads.at(0);
    if (!device->is_mapped(block.ptr, block.bytes)) {
      const PhysHandle handle = device->create_physical(kPage);
      device->map(block.ptr, kPage, handle);
      device->release_physical(handle);  // freed by the eviction's unmap
    }
    if (hook_calls % 4 == 0) {
      nested++;
      device->launch(SimLaunch{"producer", 50, {}, {block}, 1}, stream);
    }
  });
  auto worker = [&](int id) {
    try {
      const StreamHandle stream = device->create_stream();
      const DevicePtr va = device->reserve(kPage);
      for (int i = 0; i < kLaunches; ++i) {
        device->launch(SimLaunch{"consumer", 100, {{va, 4096}}, {{va + 4096, 4096}}, 2}, stream);
        if (i % 50 == 49) {
          // Evict: wait for the stream, then unmap; the hook maps again on the next launch.
          device->synchronize_stream(stream);
          device->unmap(va, kPage);
        }
      }
      device->synchronize_stream(stream);
    } catch (const std::exception& error) {
      first_failure[id] = error.what();
      failures++;
    }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (auto& thread : threads) thread.join();
  device->set_launch_hook({});

  for (int id = 0; id < kThreads; ++id) {
    INFO("thread " << id);
    CHECK(first_failure[id].empty());
  }
  CHECK(failures == 0);
  CHECK(hook_calls == kThreads * kLaunches);
  CHECK(device->counters().kernels == static_cast<std::uint64_t>(kThreads * kLaunches + nested));
  CHECK(device->counters().maps == kThreads * kLaunches / 50);
  device->check_invariants();
}
