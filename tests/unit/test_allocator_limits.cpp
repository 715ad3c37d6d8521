// Limits, the OOM path, garbage collection and page reclaiming.
#include "tests/support/allocator_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <vector>

using namespace delta;
using namespace delta::testing;

TEST_CASE("the limit is the memory fraction of the device, or the hard limit when lower") {
  AllocatorConfig config;
  config.memory_fraction = 0.5;
  SimAllocator a(1 * GiB, config);
  CHECK(a->limit_bytes() == 512 * MiB);
  CHECK(a->stats().limit_bytes == 512 * MiB);
  config.hard_limit_bytes = 100 * MiB;
  SimAllocator b(1 * GiB, config);
  CHECK(b->limit_bytes() == 100 * MiB);
  void* p = b->allocate(90 * MiB, 0);
  CHECK_THROWS_AS(b->allocate(20 * MiB, 0), OutOfMemoryError);
  b->deallocate(p);
  b->check_invariants();
}

TEST_CASE("a limit under one page is refused, naming what set it, and changes nothing at run time") {
  AllocatorConfig tiny;
  tiny.hard_limit_bytes = 1 * MiB;  // under the sim's 2 MiB page: every allocation would fail
  CHECK_THROWS_WITH(SimAllocator(1 * GiB, tiny), Catch::Contains("under one page") && Catch::Contains("DELTA_MEMORY_LIMIT"));
  AllocatorConfig sliver;
  sliver.memory_fraction = 1e-300;
  CHECK_THROWS_WITH(SimAllocator(1 * GiB, sliver), Catch::Contains("under one page") && Catch::Contains("memory fraction"));

  SimAllocator a(1 * GiB);
  void* p = a->allocate(4 * MiB, 0);
  const std::size_t limit = a->limit_bytes();
  CHECK_THROWS_WITH(a->set_memory_fraction(1e-300), Catch::Contains("under one page"));
  CHECK(a->limit_bytes() == limit);
  CHECK(a->stats().limit_bytes == limit);
  void* q = a->allocate(4 * MiB, 0);  // still served under the old limit
  a->deallocate(p);
  a->deallocate(q);
  a->check_invariants();
}

TEST_CASE("the OOM error says what was requested, allocated, reserved and allowed") {
  SimAllocator a(64 * MiB);
  void* p = a->allocate(50 * MiB, 0);
  try {
    a->allocate(30 * MiB, 0);
    FAIL("expected an OOM");
  } catch (const OutOfMemoryError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("tried to allocate 30.00 MiB"));
    CHECK_THAT(m, Catch::Contains("allocated 50.00 MiB"));
    CHECK_THAT(m, Catch::Contains("reserved 50.00 MiB"));
    CHECK_THAT(m, Catch::Contains("limit 64.00 MiB"));
  }
  CHECK(a->stats().ooms == 1);
  a->check_invariants();
  // The allocator is still usable after an OOM.
  void* q = a->allocate(10 * MiB, 0);
  CHECK(q != nullptr);
  a->deallocate(p);
  a->deallocate(q);
  a->check_invariants();
}

TEST_CASE("an OOM writes a dump when asked to") {
  AllocatorConfig config;
  std::string path = "/tmp/delta_test_oom_dump_" + std::to_string(::getpid()) + ".json";
  config.oom_dump_path = path;
  config.event_log_capacity = 64;
  SimAllocator a(32 * MiB, config);
  void* p = a->allocate(30 * MiB, 0);
  CHECK_THROWS_WITH(a->allocate(30 * MiB, 0), Catch::Contains("State dumped to " + path));
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in);
  CHECK(doc["stats"]["allocated_bytes"] == 30 * MiB);
  CHECK(doc["events"].back()["kind"] == "oom");
  std::remove(path.c_str());
  a->deallocate(p);
}

TEST_CASE("cached pages of other sizes and streams are reclaimed before failing") {
  SimAllocator a(64 * MiB);
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(a->allocate(6 * MiB, s1));  // 48 MiB mapped
  for (void* p : blocks) a->deallocate(p);
  auto before = a->stats();
  CHECK(before.reserved_bytes == 48 * MiB);
  // 60 MiB on another stream: only possible by remapping s1's idle pages.
  void* big = a->allocate(60 * MiB, s2);
  REQUIRE(big != nullptr);
  auto after = a->stats();
  CHECK(after.reserved_bytes <= 64 * MiB);
  CHECK(after.segment_unmaps >= 14);  // at least 30 pages needed, at most 16 new ones
  a->check_invariants();
  a->deallocate(big);
  a->check_invariants();
}

TEST_CASE("unused page bytes count the idle pages, which a mapping at the cap takes without flushing") {
  AllocatorConfig config;
  config.hard_limit_bytes = 16 * MiB;  // eight pages
  SimAllocator a(1 * GiB, config);
  CHECK(a->unused_page_bytes() == 0);
  void* first = a->allocate(6 * MiB, 0);   // pages 0-2
  void* second = a->allocate(3 * MiB, 0);  // page 3, and half of page 4
  void* third = a->allocate(3 * MiB, 0);   // the other half of page 4, and page 5
  void* fourth = a->allocate(4 * MiB, 0);  // pages 6-7: at the cap
  CHECK(a->stats().reserved_bytes == 16 * MiB);
  CHECK(a->unused_page_bytes() == 0);
  a->deallocate(first);
  a->deallocate(second);  // page 4 still holds part of `third`: not idle
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 16 * MiB);
  CHECK(a->unused_page_bytes() == 8 * MiB);
  // Pages of its own at the cap, refusing to flush: the idle pages are its room.
  void* own = a->allocate(6 * MiB, 0, Placement{.own_pages = true, .when_short = WhenShort::fail});
  REQUIRE(own != nullptr);
  a->check_invariants();
  CHECK(a->unused_page_bytes() == 2 * MiB);
  void* last = a->allocate(2 * MiB, 0, Placement{.own_pages = true, .when_short = WhenShort::fail});
  CHECK(a->unused_page_bytes() == 0);
  CHECK(a->stats().reserved_bytes == 16 * MiB);
  CHECK_THROWS_AS(a->allocate(2 * MiB, 0, Placement{.own_pages = true, .when_short = WhenShort::fail}), OutOfMemoryError);
  for (void* p : {own, last, third, fourth}) a->deallocate(p);
  a->check_invariants();
  CHECK(a->unused_page_bytes() == a->stats().reserved_bytes);
}

TEST_CASE("fragmented free space is recovered page by page, not segment by segment") {
  // Interleave 3 MiB blocks, free every other one: the holes cannot hold 12 MiB, but their
  // whole pages can be remapped to where 12 MiB fits.
  SimAllocator a(48 * MiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(a->allocate(3 * MiB, 0));
  for (int i = 0; i < 10; i += 2) a->deallocate(blocks[i]);
  a->check_invariants();
  void* big = a->allocate(12 * MiB, 0);
  REQUIRE(big != nullptr);
  a->check_invariants();
  CHECK(a->stats().reserved_bytes <= 48 * MiB);
  a->deallocate(big);
  for (int i = 1; i < 10; i += 2) a->deallocate(blocks[i]);
  a->check_invariants();
}

TEST_CASE("garbage collection reuses idle pages instead of growing past the threshold") {
  // Ten 8 MiB holes pinned apart by live blocks, then larger requests that fit no hole:
  // without reclaiming, the holes stay cached and the reservation keeps growing.
  auto run = [](double threshold) {
    AllocatorConfig config;
    config.garbage_collection_threshold = threshold;
    SimAllocator a(512 * MiB, config);
    std::vector<void*> holes, live;
    for (int i = 0; i < 10; ++i) {
      holes.push_back(a->allocate(8 * MiB, 0));
      live.push_back(a->allocate(2 * MiB, 0));
    }
    for (void* p : holes) a->deallocate(p);
    for (int i = 0; i < 5; ++i) live.push_back(a->allocate(20 * MiB, 0));
    a->check_invariants();
    auto s = a->stats();
    for (void* p : live) a->deallocate(p);
    a->check_invariants();
    return s;
  };
  auto with_gc = run(0.25);
  auto without = run(0.0);
  CHECK(without.gc_runs == 0);
  CHECK(without.reserved_bytes == 200 * MiB);
  CHECK(with_gc.gc_runs > 0);
  CHECK(with_gc.reserved_bytes <= 128 * MiB);  // 0.25 of 512 MiB; live is 120 MiB
  CHECK(with_gc.allocated_bytes == without.allocated_bytes);
}

TEST_CASE("lowering the memory fraction releases cached pages") {
  SimAllocator a(256 * MiB);
  void* p = a->allocate(100 * MiB, 0);
  void* q = a->allocate(20 * MiB, 0);
  a->deallocate(p);
  a->set_memory_fraction(0.25);
  CHECK(a->limit_bytes() == 64 * MiB);
  CHECK(a->stats().reserved_bytes == 20 * MiB);
  CHECK_THROWS_AS(a->set_memory_fraction(0.0), std::invalid_argument);
  CHECK_THROWS_AS(a->set_memory_fraction(1.5), std::invalid_argument);
  a->deallocate(q);
  a->check_invariants();
}

TEST_CASE("a request larger than the device fails cleanly") {
  SimAllocator a(64 * MiB);
  CHECK_THROWS_AS(a->allocate(1 * GiB, 0), OutOfMemoryError);
  CHECK_THROWS_AS(a->allocate(SIZE_MAX - 100, 0), OutOfMemoryError);
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 0);
}

// Where the next small block goes after an allocation or a map that found no pages: with the
// default (flush_then_fail) the bins were flushed, so the freed 4 KiB block merged into the
// free tail and a 4 KiB request takes the best fit, the 8 KiB hole; with WhenShort::fail the
// bins are as they were and it takes the freed block back. Run mode relies on the second to
// flush only where the planner's ledger does.
TEST_CASE("WhenShort::fail refuses without flushing the bins; the default flushes them first") {
  constexpr std::size_t KiB = 1024;
  AllocatorConfig config;
  config.hard_limit_bytes = 8 * MiB;  // four pages
  SimAllocator a(1 * GiB, config);
  void* hole = a->allocate(8 * KiB, 0);  // the small pool's first page: hole, keep, freed
  void* keep = a->allocate(4 * KiB, 0);
  void* freed = a->allocate(4 * KiB, 0);
  void* big = a->allocate(6 * MiB, 0, Placement{.own_pages = true});  // three pages: at the limit
  a->unmap_pages(big, 4 * MiB, 2 * MiB);                             // one page away
  void* filler = a->allocate(2 * MiB, 0);                             // at the limit again
  a->deallocate(hole);
  a->deallocate(freed);  // both binned, not merged
  a->check_invariants();
  const AllocatorStats before = a->stats();
  const auto next_small = [&] {
    void* p = a->allocate(4 * KiB, 0);
    a->check_invariants();
    return p;
  };
  SECTION("allocate") {
    const WhenShort when = GENERATE(WhenShort::fail, WhenShort::flush_then_fail);
    CHECK_THROWS_AS(a->allocate(4 * MiB, 0, Placement{.when_short = when}), OutOfMemoryError);
    a->check_invariants();
    CHECK(a->stats().reserved_bytes == before.reserved_bytes);
    CHECK(next_small() == (when == WhenShort::fail ? freed : hole));
  }
  SECTION("own pages") {
    const WhenShort when = GENERATE(WhenShort::fail, WhenShort::flush_then_fail);
    CHECK_THROWS_AS(a->allocate(4 * MiB, 0, Placement{.own_pages = true, .when_short = when}), OutOfMemoryError);
    CHECK(next_small() == (when == WhenShort::fail ? freed : hole));
  }
  SECTION("map_pages") {
    const WhenShort when = GENERATE(WhenShort::fail, WhenShort::flush_then_fail);
    CHECK_THROWS_AS(a->map_pages(big, 4 * MiB, 2 * MiB, when), OutOfMemoryError);
    a->check_invariants();
    CHECK_FALSE(a->pages_mapped(big, 4 * MiB, 2 * MiB));
    CHECK(next_small() == (when == WhenShort::fail ? freed : hole));
  }
  SECTION("with room, WhenShort::fail places as the default does") {
    a->deallocate(filler);  // its page idle: reclaimed, not short
    void* again = a->allocate(2 * MiB, 0, Placement{.when_short = WhenShort::fail});
    CHECK(again == filler);
    filler = again;
    CHECK(next_small() == freed);
  }
}

TEST_CASE("reclaiming an idle page waits for the work on its bytes, not for the whole stream") {
  // Under a cap most new mappings reclaim an idle page. Waiting for the page's whole stream
  // there drains the host's lead over the device; the page's fence waits only for the work
  // queued before its last block was freed.
  SimAllocator a(16 * MiB);
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  // The first reclaim: no fences yet, so it waits for s1 (idle), and turns them on.
  void* x = a->allocate(16 * MiB, s1);
  a->deallocate(x);
  void* y = a->allocate(16 * MiB, s2);
  REQUIRE(y != nullptr);
  CHECK(a->stats().segment_unmaps == 8);
  a->check_invariants();
  // 1 ms on y's bytes, freed, then 10 ms of other work on the same stream.
  const std::uint64_t start = a.sim->now_ns();
  a.sim->launch(SimLaunch{"reads y", 1'000'000, {{dptr(y), 16 * MiB}}, {}}, s2);
  a->deallocate(y);
  a.sim->launch(SimLaunch{"other work", 10'000'000, {}, {}}, s2);
  a->check_invariants();
  // s1 needs y's pages: they are unmapped once the 1 ms kernel is done (the sim refuses an
  // unmap under a kernel in flight), and the host does not wait for the 10 ms behind it.
  void* z = a->allocate(16 * MiB, s1);
  REQUIRE(z != nullptr);
  CHECK(a->stats().segment_unmaps == 16);
  CHECK(a.sim->now_ns() >= start + 1'000'000);
  CHECK(a.sim->now_ns() < start + 11'000'000);
  a->check_invariants();
  a->deallocate(z);
  a->check_invariants();
}

TEST_CASE("an idle page freed after later work waits for that work before it is reclaimed") {
  // The fence goes after everything queued on the stream when the block is freed, work
  // launched after the block's own use included.
  SimAllocator a(16 * MiB);
  StreamHandle s1 = a.sim->create_stream(), s2 = a.sim->create_stream();
  a->deallocate(a->allocate(16 * MiB, s1));
  void* y = a->allocate(16 * MiB, s2);  // the first reclaim: fences on
  const std::uint64_t start = a.sim->now_ns();
  a.sim->launch(SimLaunch{"writes y", 5'000'000, {}, {{dptr(y), 16 * MiB}}}, s2);
  a.sim->launch(SimLaunch{"reads y", 2'000'000, {{dptr(y), 16 * MiB}}, {}}, s2);
  a->deallocate(y);
  void* z = a->allocate(16 * MiB, s1);
  REQUIRE(z != nullptr);
  CHECK(a.sim->now_ns() >= start + 7'000'000);
  a->deallocate(z);
  a->check_invariants();
}
