// A randomized single-threaded run with every byte checked: each live block is filled with
// its own pattern, and after every step the invariants hold and no block was overwritten.
#include "tests/support/allocator_fixture.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace delta;
using namespace delta::testing;

namespace {
struct Live {
  void* ptr;
  std::size_t size;
  std::uint8_t seed;
  StreamHandle stream;
};

void fill(SimDevice& sim, const Live& b) {
  std::vector<std::uint8_t> bytes(b.size);
  for (std::size_t i = 0; i < b.size; ++i) bytes[i] = static_cast<std::uint8_t>(b.seed + i * 31);
  sim.write(dptr(b.ptr), bytes);
}

bool intact(SimDevice& sim, const Live& b) {
  std::vector<std::uint8_t> bytes(b.size);
  sim.read(dptr(b.ptr), bytes);
  for (std::size_t i = 0; i < b.size; ++i)
    if (bytes[i] != static_cast<std::uint8_t>(b.seed + i * 31)) return false;
  return true;
}
}  // namespace

TEST_CASE("random allocations keep invariants and never overlap") {
  AllocatorConfig config;
  config.garbage_collection_threshold = 0.7;
  SimAllocator a(96 * MiB, config);
  StreamHandle streams[] = {0, a.sim->create_stream(), a.sim->create_stream()};
  std::mt19937_64 rng(42);
  std::vector<Live> live;
  std::size_t ooms = 0;
  for (int step = 0; step < 3000; ++step) {
    bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      // Mostly small tensors, some large ones, like a training step.
      std::size_t size = rng() % 10 < 8 ? 1 + rng() % (256 * 1024) : 1 + rng() % (12 * MiB);
      StreamHandle s = streams[rng() % 3];
      try {
        void* p = a->allocate(size, s);
        Live b{p, size, static_cast<std::uint8_t>(rng()), s};
        fill(*a.sim, b);
        live.push_back(b);
      } catch (const OutOfMemoryError&) {
        ++ooms;
      }
    } else {
      std::size_t i = rng() % live.size();
      REQUIRE(intact(*a.sim, live[i]));
      if (rng() % 4 == 0) a->record_stream(live[i].ptr, streams[(rng() % 2) + 1]);
      a->deallocate(live[i].ptr);
      live[i] = live.back();
      live.pop_back();
    }
    if (rng() % 50 == 0) a.sim->advance_ns(rng() % 1'000'000);
    if (rng() % 500 == 0) a->empty_cache();
    a->check_invariants();
  }
  for (const Live& b : live) REQUIRE(intact(*a.sim, b));
  for (const Live& b : live) a->deallocate(b.ptr);
  a->check_invariants();
  auto s = a->stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.reserved_bytes <= 96 * MiB);
  INFO("ooms: " << ooms);
  CHECK(s.cache_hits > s.cache_misses);
}
