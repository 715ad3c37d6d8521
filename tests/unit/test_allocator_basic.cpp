// Caching semantics on one stream: rounding, reuse, splitting, merging, pools, bad frees.
#include "tests/support/allocator_fixture.hpp"
#include "allocator/structures/page_table.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

using namespace delta;
using namespace delta::testing;

namespace {
std::size_t count_blocks(CachingAllocator& a, const char* state) {
  auto doc = nlohmann::json::parse(a.dump_json());
  std::size_t n = 0;
  for (auto& arena : doc["arenas"])
    for (auto& b : arena["blocks"]) n += b["state"] == state;
  return n;
}
}  // namespace

TEST_CASE("sizes round up to 512 bytes and zero-size requests return null") {
  SimAllocator a;
  CHECK(a->allocate(0, 0) == nullptr);
  void* p = a->allocate(1, 0);
  REQUIRE(p != nullptr);
  CHECK(a->block_size(p) == 512u);
  void* q = a->allocate(513, 0);
  CHECK(a->block_size(q) == 1024u);
  CHECK(dptr(p) % 512 == 0);
  CHECK(dptr(q) % 512 == 0);
  auto s = a->stats();
  CHECK(s.allocated_bytes == 1536);
  CHECK(s.requested_bytes == 514);
  a->check_invariants();
  a->deallocate(p);
  a->deallocate(q);
  a->check_invariants();
  CHECK(a->stats().allocated_bytes == 0);
}

TEST_CASE("a freed block is reused for the next request of the same size without new pages") {
  SimAllocator a;
  for (std::size_t size : {4096ul, 700 * 1024ul, 3 * MiB, 50 * MiB}) {
    void* p = a->allocate(size, 0);
    auto before = a->stats();
    a->deallocate(p);
    a->check_invariants();
    void* q = a->allocate(size, 0);
    auto after = a->stats();
    CHECK(q == p);
    CHECK(after.cache_hits == before.cache_hits + 1);
    CHECK(after.segment_maps == before.segment_maps);
    CHECK(after.reserved_bytes == before.reserved_bytes);
    a->deallocate(q);
    a->check_invariants();
  }
}

TEST_CASE("small and large requests come from different arenas") {
  SimAllocator a;
  void* small = a->allocate(1 * MiB, 0);
  void* large = a->allocate(1 * MiB + 1, 0);
  auto doc = nlohmann::json::parse(a->dump_json());
  REQUIRE(doc["arenas"].size() == 2);
  std::set<std::string> pools;
  for (auto& arena : doc["arenas"]) pools.insert(arena["pool"].get<std::string>());
  CHECK(pools == std::set<std::string>{"small", "large"});
  CHECK(std::llabs(static_cast<long long>(dptr(small) - dptr(large))) >= static_cast<long long>(2 * MiB));
  a->deallocate(small);
  a->deallocate(large);
  a->check_invariants();
}

TEST_CASE("large blocks split on allocation and merge back on free") {
  SimAllocator a;
  void* x = a->allocate(8 * MiB, 0);
  void* y = a->allocate(8 * MiB, 0);
  void* z = a->allocate(8 * MiB, 0);
  CHECK(dptr(y) == dptr(x) + 8 * MiB);  // packed, no per-block segment rounding
  CHECK(dptr(z) == dptr(y) + 8 * MiB);
  a->deallocate(y);
  a->check_invariants();
  // A smaller request reuses the hole left by y (best fit beats the arena's tail).
  void* w = a->allocate(3 * MiB, 0);
  CHECK(w == y);
  CHECK(a->stats().cache_hits >= 1);
  a->deallocate(w);
  a->deallocate(x);
  a->deallocate(z);
  a->check_invariants();
  CHECK(count_blocks(*a, "free") == 1);  // everything merged into one free block
  CHECK(count_blocks(*a, "allocated") == 0);
}

TEST_CASE("reserved memory counts whole pages and is kept after frees until empty_cache") {
  SimAllocator a;
  void* p = a->allocate(5 * MiB, 0);
  CHECK(a->stats().reserved_bytes == 6 * MiB);  // 3 pages of 2 MiB
  a->deallocate(p);
  CHECK(a->stats().reserved_bytes == 6 * MiB);
  CHECK(a->stats().cached_bytes == 6 * MiB);
  a->empty_cache();
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 0);
  CHECK(a.sim->counters().physical_bytes_in_use == 0);
  // Live blocks survive empty_cache with their pages.
  void* q = a->allocate(5 * MiB, 0);
  void* r = a->allocate(100, 0);
  a->empty_cache();
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 8 * MiB);
  CHECK(a.sim->is_mapped(dptr(q), 5 * MiB));
  CHECK(a.sim->is_mapped(dptr(r), 512));
  a->deallocate(q);
  a->deallocate(r);
}

TEST_CASE("bad frees are refused with a clear error and change nothing") {
  SimAllocator a;
  void* p = a->allocate(3 * MiB, 0);
  auto before = a->stats();
  auto dump_before = a->dump_json();
  SECTION("unknown pointer") {
    CHECK_THROWS_AS(a->deallocate(reinterpret_cast<void*>(0x1234)), InvalidFreeError);
  }
  SECTION("interior pointer") {
    CHECK_THROWS_WITH(a->deallocate(static_cast<char*>(p) + 512), Catch::Contains("not a live DELTA allocation"));
  }
  SECTION("double free") {
    a->deallocate(p);
    before = a->stats();
    dump_before = a->dump_json();
    CHECK_THROWS_AS(a->deallocate(p), InvalidFreeError);
  }
  auto after = a->stats();
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.free_count == before.free_count);
  auto strip_events = [](const std::string& text) {
    auto doc = nlohmann::json::parse(text);
    doc.erase("events");
    return doc.dump();
  };
  CHECK(strip_events(a->dump_json()) == strip_events(dump_before));
  a->check_invariants();
}

TEST_CASE("statistics count allocations, hits and peaks, and peaks reset") {
  SimAllocator a;
  void* p = a->allocate(10 * MiB, 0);
  void* q = a->allocate(20 * MiB, 0);
  a->deallocate(p);
  auto s = a->stats();
  CHECK(s.alloc_count == 2);
  CHECK(s.free_count == 1);
  CHECK(s.allocated_bytes == 20 * MiB);
  CHECK(s.allocated_peak == 30 * MiB);
  CHECK(s.reserved_peak == 30 * MiB);
  CHECK(s.live_blocks == 1);
  a->reset_peak_stats();
  CHECK(a->stats().allocated_peak == 20 * MiB);
  CHECK(s.fragmentation() == Approx(1.0 - 20.0 / 30.0));
  a->deallocate(q);
  a->check_invariants();
}

TEST_CASE("max_split_size keeps large cached blocks whole for small requests") {
  AllocatorConfig config;
  config.max_split_size = 16 * MiB;
  SimAllocator a(1 * GiB, config);
  void* big = a->allocate(64 * MiB, 0);
  void* guard = a->allocate(4 * MiB, 0);  // keeps big's hole from merging with the tail
  a->deallocate(big);
  void* small = a->allocate(4 * MiB, 0);
  CHECK(small != big);  // not carved out of the 64 MiB cached block
  void* similar = a->allocate(60 * MiB, 0);
  CHECK(similar == big);  // within 20 MiB of its size: reused
  a->check_invariants();
  a->deallocate(small);
  a->deallocate(similar);
  a->deallocate(guard);
  a->check_invariants();
}

TEST_CASE("roundup_power2_divisions rounds like PyTorch") {
  AllocatorConfig config;
  config.roundup_power2_divisions.assign(16, 4);
  SimAllocator a(1 * GiB, config);
  void* p = a->allocate(1200 * 1024, 0);  // in [1 MiB, 2 MiB) with 4 divisions: 1.25 MiB
  CHECK(a->block_size(p) == 1280 * 1024u);
  void* q = a->allocate(5 * MiB + 1, 0);  // [4, 8) MiB in steps of 1 MiB: 6 MiB
  CHECK(a->block_size(q) == 6 * MiB);
  void* r = a->allocate(1000, 0);  // below 512*4: plain 512 rounding
  CHECK(a->block_size(r) == 1024u);
  a->deallocate(p);
  a->deallocate(q);
  a->deallocate(r);
  a->check_invariants();
}

TEST_CASE("the dump is JSON with settings, stats, arenas and the event history") {
  AllocatorConfig config;
  config.event_log_capacity = 1024;
  SimAllocator a(1 * GiB, config);
  void* p = a->allocate(3 * MiB, 0);
  a->deallocate(p);
  auto doc = nlohmann::json::parse(a->dump_json());
  CHECK(doc["format"] == "delta-allocator-dump");
  CHECK(doc["version"] == 1);
  CHECK(doc["device"]["kind"] == "sim");
  CHECK(doc["stats"]["alloc_count"] == 1);
  std::vector<std::string> kinds;
  for (auto& e : doc["events"]) kinds.push_back(e["kind"]);
  REQUIRE(kinds.size() >= 3);
  CHECK(kinds[0] == "map");
  CHECK(std::count(kinds.begin(), kinds.end(), "alloc") == 1);
  CHECK(kinds.back() == "free");
  std::uint64_t last = 0;
  for (auto& e : doc["events"]) {
    CHECK(e["t_ns"].get<std::uint64_t>() >= last);
    last = e["t_ns"];
  }
}

TEST_CASE("the event history is a bounded ring, off by default") {
  SimAllocator off;
  off->deallocate(off->allocate(4096, 0));
  CHECK(nlohmann::json::parse(off->dump_json())["events"].empty());
  AllocatorConfig config;
  config.event_log_capacity = 8;
  SimAllocator a(1 * GiB, config);
  for (int i = 0; i < 20; ++i) a->deallocate(a->allocate(4096, 0));
  auto doc = nlohmann::json::parse(a->dump_json());
  CHECK(doc["events"].size() == 8);
  CHECK(doc["events_recorded"] == 41);  // one map, 20 allocs, 20 frees
  CHECK(doc["events"].back()["kind"] == "free");
}

// An arena's page table is zero-filled memory (allocator/page_table.hpp): that is only right
// while a Page with every byte zero is a default Page. A field given another default fails here.
TEST_CASE("a page table's zero-filled pages are default pages", "[allocator]") {
  delta::detail::PageTable table(1024);
  REQUIRE(table.size() == 1024);
  const delta::detail::Page expected{};
  for (std::size_t i : {std::size_t{0}, std::size_t{511}, std::size_t{1023}}) {
    const delta::detail::Page& page = table[i];
    CHECK(page.handle == expected.handle);
    CHECK(page.users == expected.users);
    CHECK(page.idle_prev == expected.idle_prev);
    CHECK(page.idle_next == expected.idle_next);
    CHECK(page.owner == expected.owner);
    CHECK(page.idle == expected.idle);
    CHECK(page.hole == expected.hole);
  }
  table[3].users = 2;  // writable, and moved with its contents
  delta::detail::PageTable moved = std::move(table);
  CHECK(moved[3].users == 2);
  CHECK(table.size() == 0);
}
