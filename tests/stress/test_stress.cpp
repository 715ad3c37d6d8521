// Threads × streams × random sizes and lifetimes, with cross-stream uses, empty_cache and
// invariant checks racing the allocations. Every live block carries a pattern written through
// the device and verified before it is freed: no byte of a live block may change.
#include "tests/support/allocator_fixture.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

using namespace delta;
using namespace delta::testing;

namespace {

struct Live {
  void* ptr;
  std::size_t size;
  std::uint64_t seed;
};

// Pattern only the first and last 4 KiB and a few interior words: full fills of multi-MiB
// blocks would make the test measure memcpy instead of the allocator.
std::vector<std::pair<DevicePtr, std::uint64_t>> probes(const Live& b) {
  std::vector<std::pair<DevicePtr, std::uint64_t>> out;
  std::size_t words = b.size / 8;
  for (std::size_t k = 0; k < 16 && k < words; ++k) {
    std::size_t word = k < 8 ? k : words - 1 - (k - 8) * (words / 8 + 1) % words;
    out.emplace_back(dptr(b.ptr) + word * 8, b.seed ^ (word * 0x9E3779B97F4A7C15ull));
  }
  return out;
}

void stamp(SimDevice& sim, const Live& b) {
  for (auto [addr, value] : probes(b))
    sim.write(addr, {reinterpret_cast<const std::uint8_t*>(&value), sizeof value});
}

bool intact(SimDevice& sim, const Live& b) {
  for (auto [addr, value] : probes(b)) {
    std::uint64_t got = 0;
    sim.read(addr, {reinterpret_cast<std::uint8_t*>(&got), sizeof got});
    if (got != value) return false;
  }
  return true;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

}  // namespace

TEST_CASE("threads and streams hammer one allocator") {
  const int threads = env_int("DELTA_STRESS_THREADS", 8);
  const int steps = env_int("DELTA_STRESS_STEPS", 20000);
  AllocatorConfig config;
  config.garbage_collection_threshold = 0.8;
  SimAllocator a(512 * MiB, config);
  std::vector<StreamHandle> streams{0};
  for (int i = 0; i < 4; ++i) streams.push_back(a.sim->create_stream());

  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> ooms{0}, corrupted{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<Live> live;
      StreamHandle home = streams[t % streams.size()];
      try {
        for (int step = 0; step < steps && !failed; ++step) {
          unsigned dice = rng() % 1000;
          if (live.empty() || dice < 520) {
            std::size_t size = rng() % 10 < 8 ? 1 + rng() % 65536 : 1 + rng() % (6 * MiB);
            if (live.size() > 64) size = 1 + rng() % 4096;
            try {
              Live b{a->allocate(size, home), size, rng()};
              stamp(*a.sim, b);
              live.push_back(b);
            } catch (const OutOfMemoryError&) {
              ++ooms;
            }
          } else if (dice < 990) {
            std::size_t i = rng() % live.size();
            if (!intact(*a.sim, live[i])) ++corrupted;
            if (rng() % 8 == 0) a->record_stream(live[i].ptr, streams[rng() % streams.size()]);
            a->deallocate(live[i].ptr);
            live[i] = live.back();
            live.pop_back();
          } else if (dice < 995) {
            a->check_invariants();
          } else if (dice < 997) {
            a->empty_cache();
          } else {
            a.sim->advance_ns(rng() % 100'000);
          }
        }
        for (const Live& b : live) {
          if (!intact(*a.sim, b)) ++corrupted;
          a->deallocate(b.ptr);
        }
      } catch (const std::exception& e) {
        failed = true;
        FAIL_CHECK("worker " << t << " failed: " << e.what());
      }
    });
  }
  for (auto& w : workers) w.join();
  REQUIRE_FALSE(failed);
  CHECK(corrupted == 0);
  a.sim->advance_ns(1'000'000'000);
  a->empty_cache();
  a->check_invariants();
  auto s = a->stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.active_bytes == 0);
  CHECK(s.reserved_bytes == 0);
  CHECK(s.alloc_count == s.free_count);
  INFO("allocations " << s.alloc_count << ", OOMs " << ooms.load());
  CHECK(s.alloc_count > static_cast<std::uint64_t>(threads) * steps / 3);
}
