// The residency hooks: blocks on pages of their own (Placement::own_pages), whose pages can be
// unmapped and mapped again at the same addresses (unmap_pages / map_pages), and the spare
// pool made up front (reserve_spare_pages). Every step is followed by the invariant checker.
#include "tests/support/allocator_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

using namespace delta;
using namespace delta::testing;

namespace {

constexpr std::size_t P = 2 * MiB;  // the sim's granularity: the allocator's page
constexpr Placement own{true};

void fill(SimDevice& sim, void* ptr, std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::uint8_t>(seed + i * 7 + (i >> 12));
  sim.write(dptr(ptr), data);
}

bool holds(SimDevice& sim, void* ptr, std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> data(bytes);
  sim.read(dptr(ptr), data);
  for (std::size_t i = 0; i < bytes; ++i)
    if (data[i] != static_cast<std::uint8_t>(seed + i * 7 + (i >> 12))) return false;
  return true;
}

void* at(void* p, std::size_t offset) { return static_cast<char*>(p) + offset; }

std::string without_events(const std::string& dump) {
  auto doc = nlohmann::json::parse(dump);
  doc.erase("events");
  doc.erase("events_recorded");
  return doc.dump();
}

// Pages [first, last] a block touches, as page numbers of the address space.
std::pair<DevicePtr, DevicePtr> page_span(void* p, std::size_t size) {
  return {dptr(p) / P, (dptr(p) + size - 1) / P};
}

bool share_a_page(void* a, std::size_t a_size, void* b, std::size_t b_size) {
  auto [a0, a1] = page_span(a, a_size);
  auto [b0, b1] = page_span(b, b_size);
  return a0 <= b1 && b0 <= a1;
}

}  // namespace

TEST_CASE("own-pages blocks start on a page, span whole pages and report the rounded size") {
  SimAllocator a;
  REQUIRE(a.sim->granularity() == P);
  CHECK(a->allocate(0, 0, own) == nullptr);
  for (std::size_t size : {std::size_t(1), std::size_t(4096), P - 1, P, P + 1, 5 * MiB, 64 * MiB + 3}) {
    void* p = a->allocate(size, 0, own);
    REQUIRE(p != nullptr);
    CHECK(dptr(p) % P == 0);
    std::size_t rounded = (size + P - 1) / P * P;
    CHECK(a->block_size(p) == rounded);
    CHECK(a->stats().allocated_bytes == rounded);
    CHECK(a->stats().requested_bytes == size);
    CHECK(a.sim->is_mapped(dptr(p), rounded));
    CHECK(a->pages_mapped(p, 0, rounded));
    a->check_invariants();
    a->deallocate(p);
    a->check_invariants();
  }
  auto doc = nlohmann::json::parse(a->dump_json());
  bool pages_arena = false;
  for (auto& arena : doc["arenas"]) {
    if (arena["pool"] != "pages") continue;
    pages_arena = true;
    for (auto& b : arena["blocks"]) {
      CHECK(b["ptr"].get<DevicePtr>() % P == 0);
      CHECK(b["size"].get<std::size_t>() % P == 0);
    }
  }
  CHECK(pages_arena);
}

TEST_CASE("own-pages blocks never share a page with another block") {
  SimAllocator a(1 * GiB);
  SECTION("a fixed sequence: small and large neighbours, and own-pages blocks side by side") {
    void* s1 = a->allocate(4096, 0);
    void* o1 = a->allocate(3 * MiB, 0, own);     // 2 pages
    void* l1 = a->allocate(3 * MiB, 0);
    void* o2 = a->allocate(100, 0, own);         // 1 page
    void* s2 = a->allocate(700 * 1024, 0);
    void* o3 = a->allocate(2 * MiB, 0, own);     // 1 page
    a->check_invariants();
    // Own-pages blocks are packed page after page, each on its own pages.
    CHECK(dptr(o2) == dptr(o1) + 4 * MiB);
    CHECK(dptr(o3) == dptr(o2) + 2 * MiB);
    std::vector<std::pair<void*, std::size_t>> owned{{o1, 4 * MiB}, {o2, P}, {o3, P}};
    std::vector<std::pair<void*, std::size_t>> others{{s1, 4096}, {l1, 3 * MiB}, {s2, 700 * 1024}};
    for (auto [o, os] : owned)
      for (auto [x, xs] : others) CHECK_FALSE(share_a_page(o, os, x, xs));
    // A freed own-pages block's space is carved again into whole pages only: a one-page block
    // takes its first page, the next one its second.
    a->deallocate(o1);
    a->check_invariants();
    void* o4 = a->allocate(1 * MiB, 0, own);
    void* o5 = a->allocate(512 * 1024, 0, own);
    CHECK(o4 == o1);
    CHECK(dptr(o5) == dptr(o1) + P);
    CHECK(a->block_size(o4) == P);
    CHECK(a->block_size(o5) == P);
    CHECK_FALSE(share_a_page(o4, P, o5, P));
    // Ordinary requests, however many, are never carved into those pages.
    std::vector<void*> small;
    for (int i = 0; i < 200; ++i) {
      void* q = a->allocate(512 + 512 * (i % 7), 0);
      small.push_back(q);
      for (void* o : {o2, o3, o4, o5}) CHECK_FALSE(share_a_page(o, P, q, 4096));
    }
    a->check_invariants();
    for (void* q : small) a->deallocate(q);
    for (void* p : {s1, l1, o2, s2, o3, o4, o5}) a->deallocate(p);
    a->check_invariants();
    CHECK(a->stats().allocated_bytes == 0);
  }
  SECTION("random mixes of own-pages and ordinary blocks on two streams") {
    StreamHandle s = a.sim->create_stream();
    std::mt19937_64 rng(7);
    struct B {
      void* p;
      std::size_t size;
      bool own;
    };
    std::vector<B> live;
    for (int step = 0; step < 600; ++step) {
      if (live.empty() || rng() % 100 < 55) {
        bool own_pages = rng() % 3 == 0;
        std::size_t size = rng() % 4 == 0 ? 1 + rng() % (7 * MiB) : 1 + rng() % 300000;
        void* p = a->allocate(size, rng() % 2 ? s : 0, Placement{own_pages});
        live.push_back({p, *a->block_size(p), own_pages});
      } else {
        std::size_t i = rng() % live.size();
        a->deallocate(live[i].p);
        live[i] = live.back();
        live.pop_back();
      }
      for (const B& x : live) {
        if (!x.own) continue;
        CHECK(dptr(x.p) % P == 0);
        for (const B& y : live)
          if (y.p != x.p && share_a_page(x.p, x.size, y.p, y.size)) FAIL("own-pages block " << x.p << " shares a page with " << y.p);
      }
      if (step % 50 == 0) a->check_invariants();
    }
    for (const B& x : live) a->deallocate(x.p);
    a->check_invariants();
  }
}

TEST_CASE("the default placement is the two-argument allocate, unchanged") {
  // A fixed mixed sequence whose addresses (as offsets into the arenas) and page statistics
  // were recorded before the residency hooks existed: ordinary allocations must not move.
  auto run = [](bool explicit_default) {
    AllocatorConfig config;
    config.garbage_collection_threshold = 0.5;
    SimAllocator a(256 * MiB, config);
    StreamHandle s1 = a.sim->create_stream();
    std::mt19937_64 rng(42);
    std::vector<void*> live;
    std::vector<DevicePtr> trace;
    for (int i = 0; i < 400; ++i) {
      unsigned d = rng() % 100;
      if (live.empty() || d < 55) {
        std::size_t size = rng() % 4 == 0 ? 1 + rng() % (12 * MiB) : 1 + rng() % 200000;
        StreamHandle stream = rng() % 3 == 0 ? s1 : 0;
        try {
          void* p = explicit_default ? a->allocate(size, stream, Placement{}) : a->allocate(size, stream);
          live.push_back(p);
          trace.push_back(dptr(p));
        } catch (const OutOfMemoryError&) {
          trace.push_back(0);
        }
      } else if (d < 97) {
        std::size_t k = rng() % live.size();
        a->deallocate(live[k]);
        live[k] = live.back();
        live.pop_back();
      } else {
        a->empty_cache();
      }
    }
    a->check_invariants();
    auto doc = nlohmann::json::parse(a->dump_json());
    std::vector<DevicePtr> bases;
    for (auto& arena : doc["arenas"]) bases.push_back(arena["base"].get<DevicePtr>());
    std::sort(bases.begin(), bases.end());
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (DevicePtr p : trace) {
      if (!p) {
        mix(0);
        continue;
      }
      std::size_t k = std::upper_bound(bases.begin(), bases.end(), p) - bases.begin() - 1;
      mix(k);
      mix(p - bases[k]);
    }
    auto s = a->stats();
    CHECK(trace.size() == 209);
    CHECK(s.reserved_bytes == 58720256);
    CHECK(s.segment_maps == 121);
    CHECK(s.cache_hits == 168);
    CHECK(s.unmapped_bytes == 0);
    CHECK(s.spare_bytes == 0);
    return h;
  };
  CHECK(run(false) == 0x7bd37de37f452ec2ull);
  CHECK(run(true) == 0x7bd37de37f452ec2ull);
}

TEST_CASE("unmap_pages then map_pages keeps the address, and the pages work again") {
  SimAllocator a;
  void* p = a->allocate(6 * MiB, 0, own);
  fill(*a.sim, p, 6 * MiB, 1);
  auto before = a->stats();
  auto creates = a.sim->counters().physical_creates;
  CHECK(a->unmap_pages(p, 0, 6 * MiB) == 6 * MiB);
  a->check_invariants();
  auto s = a->stats();
  CHECK(s.reserved_bytes == before.reserved_bytes - 6 * MiB);
  CHECK(s.unmapped_bytes == 6 * MiB);
  CHECK(s.allocated_bytes == before.allocated_bytes);  // still the caller's block
  CHECK(s.segment_unmaps == before.segment_unmaps + 3);
  CHECK(a.sim->counters().physical_releases == 3);     // given back, not kept
  CHECK(a.sim->counters().physical_bytes_in_use == 0);
  CHECK(a->owns(p));
  CHECK(a->block_size(p) == 6 * MiB);
  for (std::size_t off = 0; off < 6 * MiB; off += P) {
    CHECK_FALSE(a.sim->is_mapped(dptr(p) + off, 1));
    CHECK_FALSE(a->pages_mapped(p, off, P));
  }
  std::uint8_t byte = 0;
  CHECK_THROWS_AS(a.sim->read(dptr(p), {&byte, 1}), DeviceError);

  a->map_pages(p, 0, 6 * MiB);
  a->check_invariants();
  CHECK(a.sim->is_mapped(dptr(p), 6 * MiB));
  CHECK(a->pages_mapped(p, 0, 6 * MiB));
  CHECK(a.sim->counters().physical_creates == creates + 3);
  s = a->stats();
  CHECK(s.reserved_bytes == before.reserved_bytes);
  CHECK(s.unmapped_bytes == 0);
  CHECK(s.segment_maps == before.segment_maps + 3);
  fill(*a.sim, p, 6 * MiB, 2);
  CHECK(holds(*a.sim, p, 6 * MiB, 2));
  a->deallocate(p);
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 6 * MiB);  // cached as usual
}

TEST_CASE("cached bytes stay what is reserved and idle while a live block's pages are unmapped") {
  SimAllocator a;
  void* p = a->allocate(6 * MiB, 0, own);
  void* q = a->allocate(4 * MiB, 0, own);
  a->deallocate(q);
  CHECK(a->stats().cached_bytes == 4 * MiB);
  REQUIRE(a->unmap_pages(p, 0, 6 * MiB) == 6 * MiB);
  // The live block holds no memory now; the freed one's pages are still idle and reusable
  // (this read 0 when cached was reserved minus active, the unmapped block counted active).
  const auto s = a->stats();
  CHECK(s.reserved_bytes == 4 * MiB);
  CHECK(s.cached_bytes == 4 * MiB);
  CHECK(nlohmann::json::parse(a->dump_json())["stats"]["cached_bytes"] == 4 * MiB);
  a->map_pages(p, 0, 6 * MiB);
  CHECK(a->stats().cached_bytes == 4 * MiB);
  a->check_invariants();
  a->deallocate(p);
}

TEST_CASE("unmapping part of a block leaves the rest mapped and intact") {
  SimAllocator a;
  void* p = a->allocate(8 * MiB, 0, own);  // 4 pages
  fill(*a.sim, p, 8 * MiB, 3);
  SECTION("the tail") {
    CHECK(a->unmap_pages(p, 4 * MiB, 4 * MiB) == 4 * MiB);
    a->check_invariants();
    CHECK(a.sim->is_mapped(dptr(p), 4 * MiB));
    CHECK_FALSE(a.sim->is_mapped(dptr(p) + 4 * MiB, 1));
    CHECK_FALSE(a.sim->is_mapped(dptr(p) + 6 * MiB, 1));
    CHECK(a->pages_mapped(p, 0, 4 * MiB));
    CHECK_FALSE(a->pages_mapped(p, 0, 8 * MiB));
    CHECK_FALSE(a->pages_mapped(p, 6 * MiB, 2 * MiB));
    CHECK(holds(*a.sim, p, 4 * MiB, 3));
    CHECK(a->stats().unmapped_bytes == 4 * MiB);
    CHECK(a->stats().reserved_bytes == 4 * MiB);
    a->map_pages(p, 4 * MiB, 4 * MiB);
    a->check_invariants();
    CHECK(holds(*a.sim, p, 4 * MiB, 3));  // the part never unmapped kept its bytes
  }
  SECTION("pages in the middle, one at a time, mapped back in another order") {
    a->unmap_pages(p, 2 * MiB, 2 * MiB);
    a->unmap_pages(p, 4 * MiB, 2 * MiB);
    a->check_invariants();
    CHECK(a->stats().unmapped_bytes == 4 * MiB);
    CHECK(a->pages_mapped(p, 0, 2 * MiB));
    CHECK(a->pages_mapped(p, 6 * MiB, 2 * MiB));
    CHECK(holds(*a.sim, p, 2 * MiB, 3));
    std::vector<std::uint8_t> tail(2 * MiB);
    a.sim->read(dptr(p) + 6 * MiB, tail);
    std::vector<std::uint8_t> whole(8 * MiB);
    for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<std::uint8_t>(3 + i * 7 + (i >> 12));
    CHECK(std::equal(tail.begin(), tail.end(), whole.begin() + 6 * MiB));
    a->map_pages(p, 4 * MiB, 2 * MiB);
    a->check_invariants();
    CHECK(a->stats().unmapped_bytes == 2 * MiB);
    a->map_pages(p, 2 * MiB, 2 * MiB);
    a->check_invariants();
    CHECK(a->stats().unmapped_bytes == 0);
    CHECK(a.sim->is_mapped(dptr(p), 8 * MiB));
  }
  CHECK(a->unmap_pages(p, 0, 0) == 0);  // an empty range is no work
  CHECK(a->pages_mapped(p, 8 * MiB, 0));
  a->map_pages(p, 0, 0);
  a->deallocate(p);
  a->check_invariants();
}

TEST_CASE("map_pages honours the limit: out of memory leaves the range unmapped, and works after a free") {
  AllocatorConfig config;
  config.hard_limit_bytes = 20 * MiB;
  SimAllocator a(1 * GiB, config);
  void* p = a->allocate(8 * MiB, 0, own);  // 4 pages
  void* n = a->allocate(12 * MiB, 0);      // 6 pages: at the limit
  CHECK(a->stats().reserved_bytes == 20 * MiB);
  a->unmap_pages(p, 0, 8 * MiB);
  CHECK(a->stats().reserved_bytes == 12 * MiB);
  void* m = a->allocate(6 * MiB, 0);  // 3 pages: room for one more page only
  CHECK(a->stats().reserved_bytes == 18 * MiB);
  a->check_invariants();
  auto before = a->stats();
  auto counters = a.sim->counters();
  try {
    a->map_pages(p, 0, 8 * MiB);
    FAIL("expected an OOM");
  } catch (const OutOfMemoryError& e) {
    CHECK_THAT(e.what(), Catch::Contains("map_pages(0x"));
    CHECK_THAT(e.what(), Catch::Contains("needs 4 page(s)"));
    CHECK_THAT(e.what(), Catch::Contains("limit 20.00 MiB"));
  }
  a->check_invariants();
  auto after = a->stats();
  CHECK(after.ooms == before.ooms + 1);
  CHECK(after.reserved_bytes == before.reserved_bytes);
  CHECK(after.unmapped_bytes == 8 * MiB);
  CHECK(a.sim->counters().physical_creates == counters.physical_creates);
  CHECK(a.sim->counters().maps == counters.maps);
  for (std::size_t off = 0; off < 8 * MiB; off += P) CHECK_FALSE(a->pages_mapped(p, off, P));
  // Two pages fit now.
  a->map_pages(p, 0, 2 * MiB);
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 20 * MiB);
  CHECK_THROWS_AS(a->map_pages(p, 2 * MiB, 6 * MiB), OutOfMemoryError);
  a->check_invariants();
  // Freeing m leaves its three pages cached and idle: map_pages reclaims them.
  a->deallocate(m);
  a->map_pages(p, 2 * MiB, 6 * MiB);
  a->check_invariants();
  CHECK(a->pages_mapped(p, 0, 8 * MiB));
  CHECK(a->stats().reserved_bytes == 20 * MiB);
  CHECK(a.sim->counters().physical_bytes_in_use <= 20 * MiB);
  fill(*a.sim, p, 8 * MiB, 4);
  CHECK(holds(*a.sim, p, 8 * MiB, 4));
  a->deallocate(n);
  a->deallocate(p);
  a->check_invariants();
}

TEST_CASE("map_pages on a device with less room than the limit undoes what it took") {
  // Someone else holds device memory the limit does not know of: the allocator believes two
  // pages fit, the device has one.
  SimAllocator a(20 * MiB);
  void* p = a->allocate(4 * MiB, 0, own);
  void* n = a->allocate(14 * MiB, 0);
  a->unmap_pages(p, 0, 4 * MiB);
  PhysHandle other = a.sim->create_physical(4 * MiB);
  auto before = a->stats();
  auto in_use = a.sim->counters().physical_bytes_in_use;
  CHECK_THROWS_AS(a->map_pages(p, 0, 4 * MiB), OutOfMemoryError);
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == before.reserved_bytes);
  CHECK(a.sim->counters().physical_bytes_in_use == in_use);
  CHECK_FALSE(a->pages_mapped(p, 0, 2 * MiB));
  CHECK_FALSE(a->pages_mapped(p, 2 * MiB, 2 * MiB));
  a.sim->release_physical(other);
  a->map_pages(p, 0, 4 * MiB);
  a->check_invariants();
  CHECK(a->pages_mapped(p, 0, 4 * MiB));
  a->deallocate(p);
  a->deallocate(n);
}

TEST_CASE("reserve_spare_pages makes memory up front that map_pages and allocations then use") {
  AllocatorConfig config;
  config.hard_limit_bytes = 64 * MiB;
  SimAllocator a(1 * GiB, config);
  void* p = a->allocate(6 * MiB, 0, own);
  a->unmap_pages(p, 0, 6 * MiB);  // no target yet: the pages go back to the device
  CHECK(a->stats().reserved_bytes == 0);
  CHECK(a->stats().spare_bytes == 0);

  a->reserve_spare_pages(6 * MiB - 1);  // rounds up to 3 pages
  a->check_invariants();
  CHECK(a->stats().spare_bytes == 6 * MiB);
  CHECK(a->stats().reserved_bytes == 6 * MiB);
  auto counters = a.sim->counters();
  CHECK(counters.physical_bytes_in_use == 6 * MiB);

  a->map_pages(p, 0, 6 * MiB);
  a->check_invariants();
  CHECK(a.sim->counters().physical_creates == counters.physical_creates);  // no new memory
  CHECK(a->stats().spare_bytes == 0);
  CHECK(a->stats().reserved_bytes == 6 * MiB);
  fill(*a.sim, p, 6 * MiB, 5);
  CHECK(holds(*a.sim, p, 6 * MiB, 5));

  // Below its target, the pool takes unmapped pages back instead of releasing them.
  a->unmap_pages(p, 0, 6 * MiB);
  a->check_invariants();
  CHECK(a->stats().spare_bytes == 6 * MiB);
  CHECK(a->stats().reserved_bytes == 6 * MiB);
  CHECK(a.sim->counters().physical_releases == counters.physical_releases);
  a->map_pages(p, 0, 4 * MiB);
  CHECK(a.sim->counters().physical_creates == counters.physical_creates);
  CHECK(a->stats().spare_bytes == 2 * MiB);

  // Ordinary allocations take spares first too.
  void* q = a->allocate(1 * MiB + 1, 0);
  CHECK(a.sim->counters().physical_creates == counters.physical_creates);
  CHECK(a->stats().spare_bytes == 0);
  a->deallocate(q);

  // empty_cache keeps the target's worth of spares: q's idle page refills the pool.
  a->empty_cache();
  a->check_invariants();
  CHECK(a->stats().spare_bytes == 2 * MiB);
  a->reserve_spare_pages(6 * MiB);
  CHECK(a->stats().spare_bytes == 6 * MiB);
  a->empty_cache();
  CHECK(a->stats().spare_bytes == 6 * MiB);
  CHECK(a->stats().reserved_bytes == 10 * MiB);  // p's two mapped pages and the spares

  // More than the limit allows: refused, pool and target as they were.
  CHECK_THROWS_WITH(a->reserve_spare_pages(64 * MiB), Catch::Contains("reserve_spare_pages"));
  a->check_invariants();
  CHECK(a->stats().spare_bytes == 6 * MiB);
  CHECK(a->stats().reserved_bytes == 10 * MiB);
  a->unmap_pages(p, 0, 4 * MiB);  // target still 3 pages, pool full: released
  CHECK(a->stats().spare_bytes == 6 * MiB);
  CHECK(a->stats().reserved_bytes == 6 * MiB);

  // A lower target releases the spares above it.
  a->reserve_spare_pages(2 * MiB);
  a->check_invariants();
  CHECK(a->stats().spare_bytes == 2 * MiB);
  a->reserve_spare_pages(0);
  CHECK(a->stats().spare_bytes == 0);
  CHECK(a->stats().reserved_bytes == 0);
  a->deallocate(p);
  a->check_invariants();
  CHECK(a.sim->counters().physical_bytes_in_use == 0);
}

TEST_CASE("reserve_spare_pages takes idle cached pages when the limit is reached") {
  AllocatorConfig config;
  config.hard_limit_bytes = 16 * MiB;
  SimAllocator a(1 * GiB, config);
  a->deallocate(a->allocate(12 * MiB, 0));  // 6 idle pages
  a->reserve_spare_pages(8 * MiB);          // 2 new, 2 reclaimed
  a->check_invariants();
  CHECK(a->stats().spare_bytes == 8 * MiB);
  CHECK(a->stats().reserved_bytes == 16 * MiB);
  CHECK(a.sim->counters().physical_creates == 8);
}

TEST_CASE("a lower memory fraction wins over the spare target") {
  SimAllocator a(256 * MiB);
  a->reserve_spare_pages(100 * MiB);
  a->set_memory_fraction(0.25);  // 64 MiB
  a->check_invariants();
  CHECK(a->stats().reserved_bytes <= 64 * MiB);
  CHECK(a->stats().spare_bytes == a->stats().reserved_bytes);
}

TEST_CASE("a block with unmapped pages can be freed, and its space is mapped again on reuse") {
  SimAllocator a;
  StreamHandle side = a.sim->create_stream();
  void* p = a->allocate(8 * MiB, 0, own);
  fill(*a.sim, p, 8 * MiB, 6);
  a->unmap_pages(p, 2 * MiB, 4 * MiB);  // a hole in the middle
  SECTION("freed at once") {
    a->deallocate(p);
  }
  SECTION("freed while another stream still uses it") {
    a->record_stream(p, side);
    a.sim->launch(SimLaunch{"reader", 1'000'000, {{dptr(p), 2 * MiB}}, {}}, side);
    a->deallocate(p);
    a->check_invariants();
    CHECK(a->stats().pending_frees == 1);
    CHECK(a->stats().unmapped_bytes == 0);  // no longer a live block's
    void* other = a->allocate(8 * MiB, 0, own);
    CHECK(other != p);  // not reusable yet
    a->check_invariants();
    a->deallocate(other);
    a.sim->advance_ns(2'000'000);
  }
  a->check_invariants();
  auto s = a->stats();
  CHECK(s.unmapped_bytes == 0);
  CHECK_FALSE(a.sim->is_mapped(dptr(p) + 2 * MiB, 1));  // the hole stays unmapped, free space now
  CHECK_FALSE(a.sim->is_mapped(dptr(p) + 4 * MiB, 1));
  CHECK_THROWS_AS(a->unmap_pages(p, 0, 2 * MiB), std::invalid_argument);  // not live any more
  auto maps = a->stats().segment_maps;
  auto misses = a->stats().cache_misses;
  void* q = a->allocate(8 * MiB, 0, own);
  CHECK(q == p);
  a->check_invariants();
  CHECK(a.sim->is_mapped(dptr(q), 8 * MiB));
  CHECK(a->pages_mapped(q, 0, 8 * MiB));
  CHECK(a->stats().segment_maps == maps + 2);  // only the two pages of the hole
  CHECK(a->stats().cache_misses == misses + 1);
  fill(*a.sim, q, 8 * MiB, 7);
  CHECK(holds(*a.sim, q, 8 * MiB, 7));
  a->deallocate(q);
  // The same space serves ordinary blocks' pages too once reclaimed: empty it and reuse.
  a->empty_cache();
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 0);
}

TEST_CASE("a freed own-pages block's cached pages may be reused by any allocation") {
  AllocatorConfig config;
  config.hard_limit_bytes = 8 * MiB;
  SimAllocator a(1 * GiB, config);
  void* p = a->allocate(8 * MiB, 0, own);
  a->deallocate(p);
  void* n = a->allocate(7 * MiB, 0);  // only by remapping p's idle pages
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 8 * MiB);
  a->deallocate(n);
  a->check_invariants();
}

TEST_CASE("empty_cache, garbage collection and the OOM path never touch live blocks' pages, holes included") {
  AllocatorConfig config;
  config.hard_limit_bytes = 48 * MiB;
  config.garbage_collection_threshold = 0.5;
  SimAllocator a(1 * GiB, config);
  StreamHandle side = a.sim->create_stream();
  void* p = a->allocate(8 * MiB, 0, own);
  fill(*a.sim, p, 4 * MiB, 8);
  a->unmap_pages(p, 4 * MiB, 4 * MiB);
  std::vector<void*> junk;
  for (int i = 0; i < 6; ++i) junk.push_back(a->allocate(5 * MiB, side));
  for (void* q : junk) a->deallocate(q);
  a->check_invariants();
  // Garbage collection: past half the limit, new blocks take the other stream's idle pages.
  std::vector<void*> more;
  for (int i = 0; i < 4; ++i) more.push_back(a->allocate(7 * MiB, 0));
  a->check_invariants();
  CHECK(a->stats().gc_runs > 0);
  // The OOM path: a request that cannot fit, after flushing everything it can.
  CHECK_THROWS_AS(a->allocate(40 * MiB, 0), OutOfMemoryError);
  a->check_invariants();
  for (void* q : more) a->deallocate(q);
  a->empty_cache();
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 4 * MiB);
  CHECK(a->stats().unmapped_bytes == 4 * MiB);
  CHECK(a->pages_mapped(p, 0, 4 * MiB));
  CHECK_FALSE(a->pages_mapped(p, 4 * MiB, 2 * MiB));
  CHECK_FALSE(a->pages_mapped(p, 6 * MiB, 2 * MiB));
  CHECK(holds(*a.sim, p, 4 * MiB, 8));
  a->map_pages(p, 4 * MiB, 4 * MiB);
  a->deallocate(p);
  a->check_invariants();
}

TEST_CASE("own-pages blocks follow stream order and record_stream like any block") {
  SimAllocator a;
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  void* p = a->allocate(3 * MiB, s1, own);
  a->deallocate(p);
  void* q = a->allocate(3 * MiB, s2, own);
  CHECK(q != p);  // not reused across streams
  void* r = a->allocate(3 * MiB, s1, own);
  CHECK(r == p);
  a->record_stream(r, s2);
  a.sim->launch(SimLaunch{"reader", 1'000'000, {{dptr(r), 4 * MiB}}, {}}, s2);
  a->deallocate(r);
  CHECK(a->stats().pending_frees == 1);
  CHECK(a->allocate(3 * MiB, s1, own) != p);
  a->check_invariants();
  a.sim->advance_ns(2'000'000);
  void* t = a->allocate(3 * MiB, s1, own);
  CHECK(t == p);
  a->check_invariants();
}

TEST_CASE("misuse of the residency hooks is refused with a clear error and changes nothing") {
  SimAllocator a;
  void* p = a->allocate(8 * MiB, 0, own);  // 4 pages
  void* n = a->allocate(8 * MiB, 0);        // an ordinary block
  a->unmap_pages(p, 6 * MiB, 2 * MiB);       // the last page is a hole
  a->check_invariants();
  const std::string before = without_events(a->dump_json());
  const std::string hex = [&] {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(dptr(p)));
    return std::string(text);
  }();
  auto refused = [&](auto call, const std::string& says) {
    try {
      call();
      FAIL("expected std::invalid_argument containing: " << says);
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains(says));
    }
    CHECK(without_events(a->dump_json()) == before);
    a->check_invariants();
  };
  refused([&] { a->unmap_pages(n, 0, 2 * MiB); }, "not allocated with Placement::own_pages");
  refused([&] { a->map_pages(n, 0, 2 * MiB); }, "not allocated with Placement::own_pages");
  refused([&] { a->pages_mapped(n, 0, 2 * MiB); }, "not allocated with Placement::own_pages");
  refused([&] { a->unmap_pages(reinterpret_cast<void*>(0x4000), 0, 2 * MiB); }, "not a live DELTA allocation");
  refused([&] { a->unmap_pages(at(p, 2 * MiB), 0, 2 * MiB); }, "not a live DELTA allocation");  // interior
  refused([&] { a->unmap_pages(p, 512, 2 * MiB); }, "multiples of the");
  refused([&] { a->unmap_pages(p, 0, 1 * MiB); }, "multiples of the");
  refused([&] { a->map_pages(p, 6 * MiB, 3 * MiB); }, "multiples of the");
  refused([&] { a->unmap_pages(p, 8 * MiB, 2 * MiB); }, "past the end");
  refused([&] { a->unmap_pages(p, 10 * MiB, 0); }, "past the end");
  refused([&] { a->unmap_pages(p, 2 * MiB, SIZE_MAX - P + 1); }, "past the end");  // would overflow
  refused([&] { a->pages_mapped(p, 0, 10 * MiB); }, "past the end");
  // The first three pages are mapped, the last is not: a range over both is refused whole.
  refused([&] { a->unmap_pages(p, 4 * MiB, 4 * MiB); }, "is already unmapped");
  refused([&] { a->unmap_pages(p, 6 * MiB, 2 * MiB); }, "is already unmapped");
  refused([&] { a->map_pages(p, 4 * MiB, 4 * MiB); }, "is mapped");
  refused([&] { a->map_pages(p, 0, 2 * MiB); }, "is mapped");
  // Errors name the call and the pointer.
  refused([&] { a->unmap_pages(p, 6 * MiB, 2 * MiB); }, "unmap_pages(" + hex + ", offset 6291456, 2097152 bytes)");
  refused([&] { a->map_pages(p, 0, 2 * MiB); }, "map_pages(" + hex);
  CHECK(a.sim->is_mapped(dptr(p), 6 * MiB));  // nothing was unmapped by the refused calls
  a->deallocate(p);
  CHECK_THROWS_WITH(a->map_pages(p, 6 * MiB, 2 * MiB), Catch::Contains("not a live DELTA allocation"));  // freed
  a->check_invariants();
  a->deallocate(n);
  a->check_invariants();
}

TEST_CASE("the dump shows the own-pages pool, holes and the new statistics") {
  SimAllocator a;
  void* p = a->allocate(6 * MiB, 0, own);
  a->unmap_pages(p, 2 * MiB, 2 * MiB);
  a->reserve_spare_pages(2 * MiB);
  auto doc = nlohmann::json::parse(a->dump_json());
  CHECK(doc["stats"]["unmapped_bytes"] == 2 * MiB);
  CHECK(doc["stats"]["spare_bytes"] == 2 * MiB);
  bool seen = false;
  for (auto& arena : doc["arenas"]) {
    if (arena["pool"] != "pages") continue;
    CHECK(arena["blocks"][0]["unmapped_pages"] == 1);
    // Mapped runs: page 0, then page 2 (page 1 is the hole).
    CHECK(arena["mapped_pages"] == nlohmann::json::parse("[[0, 1], [2, 1]]"));
    seen = true;
  }
  CHECK(seen);
  a->map_pages(p, 2 * MiB, 2 * MiB);
  a->deallocate(p);
  a->check_invariants();
}

TEST_CASE("fragmentation counts only the mapped part of live blocks") {
  SimAllocator a;
  void* p = a->allocate(8 * MiB, 0, own);
  a->unmap_pages(p, 0, 4 * MiB);
  auto s = a->stats();
  CHECK(s.reserved_bytes == 4 * MiB);
  CHECK(s.fragmentation() == Approx(0.0));
  a->deallocate(p);
}
