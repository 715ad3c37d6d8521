// The native policy model against outcomes derived by hand from PyTorch's rules.
#include "replay/native_model.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace delta::replay;

namespace {
constexpr std::size_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

NativeCachingModel model(std::size_t capacity = 80 * GiB) { return NativeCachingModel(NativeModelConfig{capacity}); }

std::uintptr_t must_allocate(NativeCachingModel& m, std::size_t size, std::uint64_t stream = 0) {
  auto address = m.allocate(size, stream);
  REQUIRE(address.has_value());
  m.check_invariants();
  return *address;
}

std::vector<std::size_t> block_sizes(const NativeSegmentView& segment) {
  std::vector<std::size_t> sizes;
  for (const auto& b : segment.blocks) sizes.push_back(b.size);
  return sizes;
}
}  // namespace

TEST_CASE("sizes round to 512 bytes and pick the segment size by class", "[native]") {
  CHECK(NativeCachingModel::round_size(1) == 512);
  CHECK(NativeCachingModel::round_size(512) == 512);
  CHECK(NativeCachingModel::round_size(513) == 1024);
  CHECK(NativeCachingModel::allocation_size(1 * MiB) == 2 * MiB);
  CHECK(NativeCachingModel::allocation_size(1 * MiB + 512) == 20 * MiB);
  CHECK(NativeCachingModel::allocation_size(10 * MiB - 512) == 20 * MiB);
  CHECK(NativeCachingModel::allocation_size(10 * MiB) == 10 * MiB);
  CHECK(NativeCachingModel::allocation_size(11 * MiB + 512) == 12 * MiB);
}

TEST_CASE("two 600 KiB allocations share one 2 MiB small segment", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 600 * KiB);
  auto b = must_allocate(m, 600 * KiB);
  CHECK(b == a + 600 * KiB);
  auto s = m.detailed_stats();
  CHECK(s.reserved_bytes == 2 * MiB);
  CHECK(s.segments == 1);
  CHECK(s.cache_misses == 1);
  CHECK(s.cache_hits == 1);
  REQUIRE(m.segments().size() == 1);
  CHECK(m.segments()[0].small_pool);
  CHECK(block_sizes(m.segments()[0]) == std::vector<std::size_t>{600 * KiB, 600 * KiB, 2 * MiB - 1200 * KiB});
}

TEST_CASE("a 5 MiB allocation gets a 20 MiB segment whose remainder serves a 12 MiB one", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 5 * MiB);
  auto b = must_allocate(m, 12 * MiB);
  CHECK(b == a + 5 * MiB);
  CHECK(m.detailed_stats().reserved_bytes == 20 * MiB);
  REQUIRE(m.segments().size() == 1);
  // 15 MiB remained; 3 MiB is left after the 12 MiB block, more than 1 MiB, so it is split off.
  CHECK(block_sizes(m.segments()[0]) == std::vector<std::size_t>{5 * MiB, 12 * MiB, 3 * MiB});
}

TEST_CASE("a 12 MiB allocation on an empty cache is its own 12 MiB segment", "[native]") {
  auto m = model();
  must_allocate(m, 12 * MiB);
  CHECK(m.detailed_stats().reserved_bytes == 12 * MiB);
  REQUIRE(m.segments().size() == 1);
  CHECK(block_sizes(m.segments()[0]) == std::vector<std::size_t>{12 * MiB});
}

TEST_CASE("a large block is not split when at most 1 MiB would remain", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 11 * MiB + 1);  // rounds to 11 MiB + 512, segment of 12 MiB
  CHECK(m.block_size(a) == 12 * MiB);
  CHECK(m.detailed_stats().allocated_bytes == 12 * MiB);
  m.free(a);
  auto b = must_allocate(m, 5 * MiB);  // cached 12 MiB block fits; 7 MiB remain, split
  CHECK(b == a);
  CHECK(m.block_size(b) == 5 * MiB);
  CHECK(m.detailed_stats().segments == 1);
}

TEST_CASE("a small block is split when 512 bytes or more remain", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 1 * MiB);  // exactly kSmallSize: small pool
  auto b = must_allocate(m, 1 * MiB - 512);
  CHECK(b == a + 1 * MiB);
  REQUIRE(m.segments().size() == 1);
  CHECK(block_sizes(m.segments()[0]) == std::vector<std::size_t>{1 * MiB, 1 * MiB - 512, 512});
}

TEST_CASE("freed blocks are reused and merged with free neighbours", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 600 * KiB);
  auto b = must_allocate(m, 600 * KiB);
  m.free(a);
  m.check_invariants();
  auto c = must_allocate(m, 500 * KiB);  // best fit: the 600 KiB hole (smaller than the tail)
  CHECK(c == a);
  m.free(c);
  m.free(b);
  m.check_invariants();
  REQUIRE(m.segments().size() == 1);
  CHECK(block_sizes(m.segments()[0]) == std::vector<std::size_t>{2 * MiB});
  CHECK(m.detailed_stats().allocated_bytes == 0);
  CHECK(m.detailed_stats().reserved_bytes == 2 * MiB);  // cached, not returned
}

TEST_CASE("best fit takes the smallest free block that fits, lowest address first", "[native]") {
  auto m = model();
  auto big = must_allocate(m, 40 * MiB);
  auto mid = must_allocate(m, 24 * MiB);
  auto mid2 = must_allocate(m, 24 * MiB);
  m.free(big);
  m.free(mid2);
  m.free(mid);  // mid and mid2 are separate segments: no merge across segments
  CHECK(m.detailed_stats().segments == 3);
  auto x = must_allocate(m, 23 * MiB);
  CHECK(x == mid);
}

TEST_CASE("cached blocks are reused only on their own stream", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 600 * KiB, 1);
  m.free(a);
  auto b = must_allocate(m, 600 * KiB, 2);
  CHECK(b != a);
  CHECK(m.detailed_stats().segments == 2);
  auto c = must_allocate(m, 600 * KiB, 1);
  CHECK(c == a);
}

TEST_CASE("on a failed cudaMalloc the cache is released and the allocation retried", "[native]") {
  auto m = model(40 * MiB);
  auto a = must_allocate(m, 12 * MiB);
  m.free(a);  // 12 MiB stays cached
  auto b = must_allocate(m, 30 * MiB);  // 12 + 30 > 40: release the cached segment, retry
  auto s = m.detailed_stats();
  CHECK(s.retries == 1);
  CHECK(s.ooms == 0);
  CHECK(s.reserved_bytes == 30 * MiB);
  CHECK(s.device_frees == 1);
  // Nothing left to release: a further 20 MiB request is out of memory and changes nothing.
  CHECK_FALSE(m.allocate(20 * MiB, 0).has_value());
  CHECK(m.detailed_stats().ooms == 1);
  CHECK(m.detailed_stats().reserved_bytes == 30 * MiB);
  m.check_invariants();
  m.free(b);
}

TEST_CASE("split segments in use are not released on out of memory", "[native]") {
  auto m = model(24 * MiB);
  auto a = must_allocate(m, 5 * MiB);  // 20 MiB segment, 15 MiB cached inside it
  CHECK_FALSE(m.allocate(16 * MiB, 0).has_value());
  CHECK(m.detailed_stats().reserved_bytes == 20 * MiB);
  m.free(a);
  must_allocate(m, 16 * MiB);  // the whole 20 MiB segment is free again: reused, no new memory
  CHECK(m.detailed_stats().reserved_bytes == 20 * MiB);
}

TEST_CASE("empty_cache returns only whole free segments", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 600 * KiB);
  auto b = must_allocate(m, 12 * MiB);
  m.free(b);
  m.empty_cache();
  m.check_invariants();
  CHECK(m.detailed_stats().reserved_bytes == 2 * MiB);
  m.free(a);
  m.empty_cache();
  CHECK(m.detailed_stats().reserved_bytes == 0);
  CHECK(m.segments().empty());
}

TEST_CASE("freeing an unknown address is an error that changes nothing", "[native]") {
  auto m = model();
  auto a = must_allocate(m, 4096);
  CHECK_THROWS_AS(m.free(a + 512), std::invalid_argument);
  m.free(a);
  CHECK_THROWS_AS(m.free(a), std::invalid_argument);
  m.check_invariants();
  CHECK(m.allocate(0, 0) == std::optional<std::uintptr_t>(0));
}

TEST_CASE("random traffic keeps every invariant", "[native]") {
  auto m = model(2 * GiB);
  std::mt19937_64 rng(42);
  std::vector<std::uintptr_t> live;
  const std::size_t sizes[] = {1, 512, 600 * KiB, 1 * MiB, 1 * MiB + 1, 5 * MiB, 9 * MiB, 10 * MiB, 33 * MiB, 200 * MiB};
  for (int step = 0; step < 4000; ++step) {
    if (!live.empty() && rng() % 2 == 0) {
      std::size_t i = rng() % live.size();
      m.free(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      std::size_t size = sizes[rng() % std::size(sizes)] + rng() % 4096;
      if (auto a = m.allocate(size, rng() % 2)) live.push_back(*a);
    }
    m.check_invariants();
  }
  for (auto a : live) m.free(a);
  m.check_invariants();
  CHECK(m.detailed_stats().allocated_bytes == 0);
}
