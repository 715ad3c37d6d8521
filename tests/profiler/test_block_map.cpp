#include "profiler/block_map.hpp"

#include <catch2/catch.hpp>

using delta::profiler::BlockMap;
using delta::profiler::BlockOverlapError;

TEST_CASE("block map finds blocks by interior pointers, first and last byte included") {
  BlockMap map;
  map.insert(0x1000, 0x100, 1);
  map.insert(0x1100, 0x80, 2);  // adjacent: starts where block 1 ends
  map.insert(0x4000, 8, 3);

  CHECK(map.find(0x1000)->id == 1);
  CHECK(map.find(0x1050)->id == 1);
  CHECK(map.find(0x10ff)->id == 1);
  CHECK(map.find(0x1100)->id == 2);  // one past block 1 is block 2
  CHECK(map.find(0x117f)->id == 2);
  CHECK_FALSE(map.find(0x1180));     // one past block 2: a gap
  CHECK_FALSE(map.find(0x0fff));
  CHECK_FALSE(map.find(0));
  CHECK(map.find(0x4007)->id == 3);
  CHECK_FALSE(map.find(0x4008));
  CHECK(map.size() == 3);
  CHECK(map.live_bytes() == 0x100 + 0x80 + 8);
}

TEST_CASE("block map refuses overlapping live blocks and names both") {
  BlockMap map;
  map.insert(0x1000, 0x100, 1);
  CHECK_THROWS_AS(map.insert(0x10f0, 0x20, 2), BlockOverlapError);  // tail overlap
  CHECK_THROWS_AS(map.insert(0x0f00, 0x101, 3), BlockOverlapError); // reaches the first byte
  CHECK_THROWS_AS(map.insert(0x1040, 0x10, 4), BlockOverlapError);  // inside
  CHECK_THROWS_AS(map.insert(0x0800, 0x1000, 5), BlockOverlapError); // around
  try {
    map.insert(0x1080, 0x10, 7);
    FAIL("no overlap reported");
  } catch (const BlockOverlapError& e) {
    const std::string what = e.what();
    CHECK(what.find("block 7") != std::string::npos);
    CHECK(what.find("live block 1") != std::string::npos);
  }
  map.insert(0x0f00, 0x100, 6);  // ends exactly where block 1 starts: fine
  CHECK(map.size() == 2);
  CHECK_THROWS_AS(map.insert(0x2000, 0, 8), std::invalid_argument);
  CHECK_THROWS_AS(map.insert(~std::uint64_t{0} - 4, 16, 9), std::invalid_argument);
}

TEST_CASE("block map erases by start address only, and the address can be reused") {
  BlockMap map;
  map.insert(0x1000, 0x100, 1);
  CHECK_FALSE(map.erase(0x1010));  // interior pointer: not a block start
  auto gone = map.erase(0x1000);
  REQUIRE(gone);
  CHECK(gone->id == 1);
  CHECK(gone->size == 0x100);
  CHECK_FALSE(map.find(0x1000));
  CHECK(map.live_bytes() == 0);
  map.insert(0x1000, 0x200, 2);
  CHECK(map.find(0x11ff)->id == 2);
}

TEST_CASE("block map lists the blocks a byte range overlaps") {
  BlockMap map;
  map.insert(0x1000, 0x100, 1);
  map.insert(0x1200, 0x100, 2);
  map.insert(0x1400, 0x100, 3);
  auto ids = [&](std::uint64_t address, std::uint64_t bytes) {
    std::vector<std::uint64_t> out;
    for (const auto& block : map.overlapping(address, bytes)) out.push_back(block.id);
    return out;
  };
  CHECK(ids(0x1080, 0x200) == std::vector<std::uint64_t>{1, 2});  // starts inside 1, reaches into 2
  CHECK(ids(0x1100, 0x100).empty());                                // exactly the gap
  CHECK(ids(0x0000, 0x10000) == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(ids(0x14ff, 1) == std::vector<std::uint64_t>{3});
  CHECK(ids(0x1000, 0).empty());
  CHECK(ids(~std::uint64_t{0} - 2, 100).empty());                  // no overflow at the top
}
