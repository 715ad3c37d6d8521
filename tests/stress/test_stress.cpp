// Threads × streams × random sizes and lifetimes, with cross-stream uses, empty_cache and
// invariant checks racing the allocations. Every live block carries a pattern written through
// the device and verified before it is freed: no byte of a live block may change. Some blocks
// are on pages of their own, and their threads unmap and map their pages (the residency hooks)
// while the others allocate and free; the pattern is checked on the pages that are mapped.
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

constexpr std::size_t kPage = 2 * MiB;

struct Live {
  void* ptr;
  std::size_t size;
  std::uint64_t seed;
  bool own = false;             // Placement::own_pages
  std::uint32_t unmapped = 0;   // own-pages blocks: bit i set while page i is unmapped
  bool packed = false;          // Placement::packed: away from its end, at any byte
  std::size_t present = 0;      // packed blocks: the bytes present, from its start
  bool mapped_at(DevicePtr addr) const {
    const std::size_t offset = addr - reinterpret_cast<DevicePtr>(ptr);
    return packed ? offset < present : !(unmapped >> (offset / kPage) & 1);
  }
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

// Writes the probes on the block's mapped pages; `page` >= 0: on that page only.
void stamp(SimDevice& sim, const Live& b, long page = -1) {
  for (auto [addr, value] : probes(b)) {
    if (!b.mapped_at(addr)) continue;
    if (page >= 0 && (addr - dptr(b.ptr)) / kPage != static_cast<std::size_t>(page)) continue;
    sim.write(addr, {reinterpret_cast<const std::uint8_t*>(&value), sizeof value});
  }
}

bool intact(SimDevice& sim, const Live& b) {
  for (auto [addr, value] : probes(b)) {
    if (!b.mapped_at(addr)) continue;  // unmapped on purpose: its bytes are gone
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
  std::atomic<std::uint64_t> ooms{0}, corrupted{0}, unmaps{0}, maps{0}, residency_wrong{0};
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
            bool own = rng() % 10 == 0;
            if (own) size = 1 + rng() % (8 * MiB);
            const bool packed = own && rng() % 2 == 0;
            try {
              Live b{a->allocate(size, home, Placement{.own_pages = own, .packed = packed}), size, rng(), own, 0, packed, size};
              if (packed) b.size = b.present = a->block_size(b.ptr).value_or(size);  // its ranges are of the block as placed
              stamp(*a.sim, b);
              live.push_back(b);
            } catch (const OutOfMemoryError&) {
              ++ooms;
            }
          } else if (dice < 640) {
            // Take one page of an own-pages block away, or give it back.
            std::size_t start = rng() % live.size(), i = 0;
            while (i < live.size() && !live[(start + i) % live.size()].own) ++i;
            if (i == live.size()) continue;  // no own-pages block at the moment
            Live& b = live[(start + i) % live.size()];
            if (b.packed) {  // its end leaves, or all of it that is away comes back
              if (b.present == b.size || (b.present > 0 && rng() % 2 == 0)) {
                if (!intact(*a.sim, b)) ++corrupted;
                const std::size_t leaving = 1 + rng() % b.present;
                a->unmap_pages(b.ptr, b.present - leaving, leaving);
                b.present -= leaving;
                ++unmaps;
              } else {
                try {
                  a->map_pages(b.ptr, b.present, b.size - b.present);
                  b.present = b.size;
                  ++maps;
                  stamp(*a.sim, b);  // contents after mapping are undefined
                } catch (const OutOfMemoryError&) {
                  ++ooms;
                }
              }
              if (b.present > 0 && !a->pages_mapped(b.ptr, 0, b.present)) ++residency_wrong;
              if (b.present > 0 && !a.sim->is_mapped(dptr(b.ptr), b.present)) ++residency_wrong;
              continue;
            }
            std::size_t pages = (b.size + kPage - 1) / kPage;
            std::size_t page = rng() % pages;
            if (b.unmapped >> page & 1) {
              try {
                a->map_pages(b.ptr, page * kPage, kPage);
                b.unmapped &= ~(1u << page);
                ++maps;
                stamp(*a.sim, b, static_cast<long>(page));  // contents after mapping are undefined
              } catch (const OutOfMemoryError&) {
                ++ooms;
              }
            } else {
              if (!intact(*a.sim, b)) ++corrupted;
              a->unmap_pages(b.ptr, page * kPage, kPage);
              b.unmapped |= 1u << page;
              ++unmaps;
            }
            if (a->pages_mapped(b.ptr, page * kPage, kPage) != !(b.unmapped >> page & 1)) ++residency_wrong;
            if (a.sim->is_mapped(dptr(b.ptr) + page * kPage, kPage) != !(b.unmapped >> page & 1)) ++residency_wrong;
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
          } else if (dice < 998) {
            try {
              a->reserve_spare_pages((rng() % 8) * kPage);
            } catch (const OutOfMemoryError&) {
              ++ooms;
            }
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
  CHECK(residency_wrong == 0);
  INFO("unmapped pages " << unmaps.load() << ", mapped again " << maps.load());
  CHECK(unmaps > 0);
  CHECK(maps > 0);
  a.sim->advance_ns(1'000'000'000);
  a->check_invariants();
  CHECK(a->stats().unmapped_bytes == 0);
  a->reserve_spare_pages(0);
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
