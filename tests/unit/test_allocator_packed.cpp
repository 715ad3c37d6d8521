// Packed own-pages blocks (Placement::packed): moved blocks side by side in a pool of their own,
// not rounded to whole pages, sharing the page between two of them. A page is mapped while any
// block over it is present there and unmapped when the last one leaves; the present bytes of
// every block are its own throughout. Every step is followed by the invariant checker.
#include "tests/support/allocator_fixture.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace delta;
using namespace delta::testing;

namespace {

constexpr std::size_t P = 2 * MiB;  // the sim's granularity: the allocator's page
constexpr Placement packed{.own_pages = true, .packed = true};

std::uint8_t pattern(std::uint8_t seed, std::size_t i) { return static_cast<std::uint8_t>(seed + i * 13 + (i >> 11)); }

void fill(SimDevice& sim, void* ptr, std::size_t offset, std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = pattern(seed, offset + i);
  sim.write(dptr(ptr) + offset, data);
}

bool holds(SimDevice& sim, void* ptr, std::size_t offset, std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> data(bytes);
  sim.read(dptr(ptr) + offset, data);
  for (std::size_t i = 0; i < bytes; ++i)
    if (data[i] != pattern(seed, offset + i)) return false;
  return true;
}

void* at(void* p, std::size_t offset) { return static_cast<char*>(p) + offset; }

}  // namespace

TEST_CASE("packed blocks are not rounded to pages, and share the page between them") {
  SimAllocator a;
  void* x = a->allocate(3 * MiB, 0, packed);
  void* y = a->allocate(3 * MiB, 0, packed);
  a->check_invariants();
  CHECK(a->block_size(x) == 3 * MiB);
  CHECK(dptr(y) == dptr(x) + 3 * MiB);  // side by side: the page [2, 4) MiB holds both
  CHECK(a->stats().reserved_bytes == 3 * P);  // as whole pages of their own: 4 pages
  // Ordinary blocks never land in the packed pool, and packed blocks never beside them.
  void* ordinary = a->allocate(3 * MiB, 0);
  void* z = a->allocate(1 * MiB, 0, packed);
  a->check_invariants();
  const auto pages_of = [](void* p, std::size_t size) { return std::make_pair(dptr(p) / P, (dptr(p) + size - 1) / P); };
  for (auto [p, size] : {std::pair{x, 3 * MiB}, std::pair{y, 3 * MiB}, std::pair{z, 1 * MiB}}) {
    auto [a0, a1] = pages_of(p, size);
    auto [o0, o1] = pages_of(ordinary, 3 * MiB);
    CHECK((a1 < o0 || o1 < a0));
  }
  auto dump = nlohmann::json::parse(a->dump_json());
  bool seen = false;
  for (const auto& arena : dump["arenas"]) seen |= arena["pool"] == "packed";
  CHECK(seen);
  for (void* p : {x, y, z, ordinary}) a->deallocate(p);
  a->check_invariants();
}

TEST_CASE("a new packed block goes where its neighbours' pages have room before it maps a page") {
  constexpr std::size_t K = 1024;  // bytes per KiB; the sizes below are in quarter MiBs
  SimAllocator a;
  SECTION("the mapped room after a neighbour rather than the smallest hole") {
    void* x1 = a->allocate(1792 * K, 0, packed);  // [0, 1.75) MiB: page 0
    void* x2 = a->allocate(2560 * K, 0, packed);  // [1.75, 4.25): pages 0 to 2
    void* x3 = a->allocate(256 * K, 0, packed);   // [4.25, 4.5): page 2, 1.5 MiB of it free after
    a->deallocate(x2);
    a->empty_cache();  // page 1, used by nobody, goes; pages 0 and 2 stay for x1 and x3
    a->check_invariants();
    const auto reserved = a->stats().reserved_bytes;
    CHECK(reserved == 2 * P);
    // Best fit by size would take the hole's start and map page 1 for it; page 2 has room.
    void* y = a->allocate(1 * MiB, 0, packed);
    a->check_invariants();
    CHECK(dptr(y) == dptr(x3) + 256 * K);
    CHECK(a->stats().reserved_bytes == reserved);
    for (void* p : {x1, x3, y}) a->deallocate(p);
  }
  SECTION("the end of a hole, where its start would need a page") {
    void* x1 = a->allocate(2 * MiB, 0, packed);  // page 0, whole
    void* x2 = a->allocate(2560 * K, 0, packed);  // [2, 4.5): pages 1 and 2
    void* x3 = a->allocate(1 * MiB, 0, packed);   // [4.5, 5.5): page 2
    a->deallocate(x2);
    a->empty_cache();  // page 1 goes
    a->check_invariants();
    const auto reserved = a->stats().reserved_bytes;
    void* y = a->allocate(512 * K, 0, packed);  // fits [4, 4.5) on page 2, the hole's end
    a->check_invariants();
    CHECK(dptr(y) == dptr(x1) + 4 * MiB);
    CHECK(a->stats().reserved_bytes == reserved);
    // The hole's front stays free and whole: a block of its size still goes there.
    void* z = a->allocate(2 * MiB, 0, packed);
    a->check_invariants();
    CHECK(dptr(z) == dptr(x1) + 2 * MiB);
    for (void* p : {x1, x3, y, z}) a->deallocate(p);
  }
  a->check_invariants();
}

TEST_CASE("packed blocks of different groups never share a page; those of one group do") {
  SimAllocator a;
  const auto in_group = [](std::uint8_t group) { return Placement{.own_pages = true, .packed = true, .group = group}; };
  // Allocated alternately, as AdamW allocates each parameter's two moments.
  std::vector<void*> first, second;
  for (int k = 0; k < 6; ++k) {
    first.push_back(a->allocate(3 * MiB, 0, in_group(1)));
    second.push_back(a->allocate(3 * MiB, 0, in_group(2)));
    a->check_invariants();
  }
  const auto pages = [](void* p) { return std::make_pair(dptr(p) / P, (dptr(p) + 3 * MiB - 1) / P); };
  for (void* x : first)
    for (void* y : second) {
      auto [x0, x1] = pages(x);
      auto [y0, y1] = pages(y);
      CHECK((x1 < y0 || y1 < x0));
    }
  for (int k = 1; k < 6; ++k) {  // side by side within a group
    CHECK(dptr(first[k]) == dptr(first[k - 1]) + 3 * MiB);
    CHECK(dptr(second[k]) == dptr(second[k - 1]) + 3 * MiB);
  }
  CHECK(a->stats().reserved_bytes == 2 * 9 * P);  // 18 MiB a group: 9 pages each
  // One group away entirely: its pages all go, none held for the other's.
  fill(*a.sim, second[0], 0, 3 * MiB, 7);
  for (void* x : first) a->unmap_pages(x, 0, 3 * MiB);
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 9 * P);
  CHECK(holds(*a.sim, second[0], 0, 3 * MiB, 7));
  for (void* x : first) a->map_pages(x, 0, 3 * MiB);
  for (void* p : first) a->deallocate(p);
  for (void* p : second) a->deallocate(p);
  a->check_invariants();
}

TEST_CASE("a shared page stays mapped while either block is present, and each block's bytes stay its own") {
  SimAllocator a;
  void* x = a->allocate(3 * MiB, 0, packed);  // pages 0 and 1 (the first half of page 1)
  void* y = a->allocate(3 * MiB, 0, packed);  // pages 1 and 2
  fill(*a.sim, x, 0, 3 * MiB, 1);
  fill(*a.sim, y, 0, 3 * MiB, 2);
  const auto reserved = a->stats().reserved_bytes;

  CHECK(a->unmap_pages(x, 0, 3 * MiB) == P);  // only page 0: y is present on page 1
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == reserved - P);
  CHECK(a->stats().unmapped_bytes == P);
  CHECK_FALSE(a.sim->is_mapped(dptr(x), 1));
  CHECK(a.sim->is_mapped(dptr(x) + 2 * MiB, 1));
  CHECK_FALSE(a->pages_mapped(x, 0, 3 * MiB));
  CHECK(a->pages_mapped(x, 2 * MiB, 1 * MiB));
  CHECK(holds(*a.sim, y, 0, 3 * MiB, 2));

  CHECK(a->unmap_pages(y, 0, 3 * MiB) == 2 * P);  // pages 1 and 2: nobody is present there now
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == reserved - 3 * P);
  CHECK_FALSE(a.sim->is_mapped(dptr(y), 1));

  a->map_pages(x, 0, 3 * MiB);  // pages 0 and 1 come back
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == reserved - P);
  CHECK(a->pages_mapped(x, 0, 3 * MiB));
  CHECK_FALSE(a.sim->is_mapped(dptr(y) + 1 * MiB, 1));  // page 2: y is still away
  fill(*a.sim, x, 0, 3 * MiB, 3);  // contents after a map are undefined: the caller copies in

  a->map_pages(y, 0, 3 * MiB);  // page 2 only
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == reserved);
  CHECK(a->stats().unmapped_bytes == 0);
  fill(*a.sim, y, 0, 3 * MiB, 4);
  CHECK(holds(*a.sim, x, 0, 3 * MiB, 3));

  // One leaves and comes back while the other stays: the one present keeps every byte.
  a->unmap_pages(y, 0, 3 * MiB);
  a->map_pages(y, 0, 3 * MiB);
  fill(*a.sim, y, 0, 3 * MiB, 5);
  CHECK(holds(*a.sim, x, 0, 3 * MiB, 3));
  CHECK(holds(*a.sim, y, 0, 3 * MiB, 5));
  a->deallocate(x);
  a->deallocate(y);
  a->check_invariants();
}

TEST_CASE("a packed block leaves from its end, in parts, and comes back in parts") {
  SimAllocator a;
  void* x = a->allocate(5 * MiB, 0, packed);  // pages 0, 1 and the first half of 2
  void* y = a->allocate(2 * MiB, 0, packed);  // the second half of 2, the first of 3
  fill(*a.sim, x, 0, 5 * MiB, 7);
  fill(*a.sim, y, 0, 2 * MiB, 8);
  CHECK(a->unmap_pages(x, 4 * MiB, 1 * MiB) == 0);  // its part of page 2: y is present there
  a->check_invariants();
  CHECK(a->unmap_pages(x, 1 * MiB, 3 * MiB) == P);  // page 1 goes; page 0 keeps x's first MiB
  a->check_invariants();
  CHECK(holds(*a.sim, x, 0, 1 * MiB, 7));
  CHECK(holds(*a.sim, y, 0, 2 * MiB, 8));
  CHECK_FALSE(a.sim->is_mapped(dptr(x) + 2 * MiB, 1));

  // Misuse is refused and changes nothing.
  const auto refused = [&](auto call, const std::string& words) {
    const std::string before = nlohmann::json::parse(a->dump_json()).at("arenas").dump();
    CHECK_THROWS_WITH(call(), Catch::Contains(words));
    CHECK(nlohmann::json::parse(a->dump_json()).at("arenas").dump() == before);
    a->check_invariants();
  };
  refused([&] { a->unmap_pages(x, 0, 512); }, "leaves from its end");           // not the present end
  refused([&] { a->map_pages(x, 2 * MiB, 1 * MiB); }, "comes back from where"); // not where it ends
  refused([&] { a->map_pages(x, 1 * MiB, 5 * MiB); }, "past the end");
  refused([&] { a->map_pages(x, 1 * MiB, 4 * MiB + 512); }, "past the end");

  a->map_pages(x, 1 * MiB, 2 * MiB);  // page 1 back, up to 3 MiB into x
  a->check_invariants();
  CHECK(a->pages_mapped(x, 0, 3 * MiB));
  fill(*a.sim, x, 1 * MiB, 2 * MiB, 7);
  a->map_pages(x, 3 * MiB, 2 * MiB);  // the rest: page 2 never left
  a->check_invariants();
  fill(*a.sim, x, 3 * MiB, 2 * MiB, 7);
  CHECK(holds(*a.sim, x, 0, 5 * MiB, 7));
  CHECK(holds(*a.sim, y, 0, 2 * MiB, 8));
  a->deallocate(x);
  a->deallocate(y);
  a->check_invariants();
}

TEST_CASE("freeing packed blocks: away pages become free space, and a shared page waits for the freed bytes' work") {
  SimAllocator a;
  void* x = a->allocate(3 * MiB, 0, packed);
  void* y = a->allocate(3 * MiB, 0, packed);
  fill(*a.sim, y, 0, 3 * MiB, 9);

  SECTION("a block freed while away") {
    a->unmap_pages(x, 0, 3 * MiB);
    a->deallocate(x);
    a->check_invariants();
    CHECK(a->stats().unmapped_bytes == 0);  // page 0 is plain free space now, not a hole
    CHECK(holds(*a.sim, y, 0, 3 * MiB, 9));
    void* again = a->allocate(3 * MiB, 0, packed);  // page 0 mapped again for it
    CHECK(again == x);
    a->check_invariants();
    fill(*a.sim, again, 0, 3 * MiB, 10);
    CHECK(holds(*a.sim, y, 0, 3 * MiB, 9));
    a->deallocate(again);
  }
  SECTION("a block freed with its work still queued: its neighbour leaves only after that work") {
    // A kernel reads x's end on the shared page; x is freed at once (stream order), and y then
    // leaves, which unmaps the shared page: without waiting, the kernel would fault.
    a.sim->launch(SimLaunch{.name = "reads x", .duration_ns = 5'000'000, .reads = {{dptr(x) + 2 * MiB, 1 * MiB}}}, 0);
    a->deallocate(x);
    a->check_invariants();
    const auto before = a.sim->now_ns();
    CHECK(a->unmap_pages(y, 0, 3 * MiB) == 2 * P);
    CHECK(a.sim->now_ns() >= before + 4'000'000);  // the host waited for the kernel
    a->check_invariants();
    a->map_pages(y, 0, 3 * MiB);
    fill(*a.sim, y, 0, 3 * MiB, 11);
    CHECK(holds(*a.sim, y, 0, 3 * MiB, 11));
  }
  a->deallocate(y);
  a->check_invariants();
  a->empty_cache();
  a->check_invariants();
  CHECK(a->stats().reserved_bytes == 0);
}

TEST_CASE("random packed blocks leaving and coming back keep every present byte") {
  SimAllocator a(256 * MiB);
  StreamHandle side = a.sim->create_stream();
  std::mt19937 rng(GENERATE(1u, 2u, 3u, 4u));
  struct Live {
    std::size_t size;
    std::size_t present;
    std::uint8_t seed;
    bool packed;
  };
  std::map<void*, Live> live;
  for (int step = 0; step < 600; ++step) {
    const int what = static_cast<int>(rng() % 10);
    if (what < 4 || live.empty()) {  // allocate, packed mostly
      const bool is_packed = rng() % 4 != 0;
      const std::size_t size = (1 + rng() % (6 * MiB / 512)) * 512;
      void* p = nullptr;
      try {
        p = is_packed ? a->allocate(size, rng() % 5 == 0 ? side : 0, packed) : a->allocate(size, 0);
      } catch (const OutOfMemoryError&) {
        a->check_invariants();
        continue;
      }
      const auto seed = static_cast<std::uint8_t>(rng());
      fill(*a.sim, p, 0, size, seed);
      live[p] = {size, size, seed, is_packed};
    } else {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      void* p = it->first;
      Live& block = it->second;
      if (what < 6 || !block.packed) {  // free
        a->deallocate(p);
        live.erase(it);
      } else if (what < 8 && block.present > 0) {  // part of its present end leaves
        const std::size_t leaving = std::min(block.present, (1 + rng() % (4 * MiB / 512)) * 512);
        a->unmap_pages(p, block.present - leaving, leaving);
        block.present -= leaving;
      } else if (block.present < block.size) {  // part of what is away comes back, copied in
        const std::size_t coming = std::min(block.size - block.present, (1 + rng() % (4 * MiB / 512)) * 512);
        try {
          a->map_pages(p, block.present, coming);
        } catch (const OutOfMemoryError&) {
          a->check_invariants();
          continue;
        }
        fill(*a.sim, p, block.present, coming, block.seed);
        block.present += coming;
      }
    }
    a->check_invariants();
    if (step % 25 == 0) {
      a.sim->advance_ns(1'000'000);
      for (const auto& [p, block] : live) {
        if (block.packed) REQUIRE(a->pages_mapped(p, 0, block.present));
        REQUIRE(holds(*a.sim, p, 0, block.present, block.seed));
      }
    }
  }
  for (const auto& [p, block] : live) {
    REQUIRE(holds(*a.sim, p, 0, block.present, block.seed));
    a->deallocate(p);
  }
  a->check_invariants();
  CHECK(a->stats().unmapped_bytes == 0);
}

TEST_CASE("a packed block is freed whole even where the device refuses its page's fence") {
  // The fence is recorded after the block has left the live map: a refusal must not leave it
  // half released. Its stream destroyed, the event cannot be recorded; the page then waits for
  // its stream instead, and the allocator's books stay whole.
  SimAllocator a;
  const StreamHandle s = a.sim->create_stream();
  void* x = a->allocate(3 * MiB, s, packed);
  void* y = a->allocate(3 * MiB, s, packed);
  a.sim->destroy_stream(s);
  CHECK_NOTHROW(a->deallocate(x));
  a->check_invariants();
  CHECK_FALSE(a->owns(x));
  CHECK(a->owns(y));
  CHECK_NOTHROW(a->deallocate(y));
  a->check_invariants();
}
