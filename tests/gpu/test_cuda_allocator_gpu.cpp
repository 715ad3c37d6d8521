// DELTA's caching allocator on the real cuda device: blocks of many sizes keep their own
// bytes, cached blocks are reused, packed blocks share pages and move at their address,
// record_stream defers reuse, and the invariants hold.
#include "gpu_test_support.hpp"

#include <delta/allocator.hpp>
#include <delta/device.hpp>

#include <catch2/catch.hpp>

#include <map>

using namespace delta;
using gpu_test::download;
using gpu_test::pattern;
using gpu_test::upload;

TEST_CASE("blocks of many sizes keep their own data") {
  auto device = make_cuda_device(0);
  CachingAllocator allocator(device, AllocatorConfig{});
  const StreamHandle stream = device->create_stream();

  const std::size_t sizes[] = {1, 511, 512, 4096, 100000, 1 << 20, (1 << 20) + 1, 3 << 20,
                               7 << 20, 12 << 20, 25 << 20, 64 << 20};
  std::map<void*, std::vector<std::uint8_t>> live;
  std::uint32_t seed = 1;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t size : sizes) {
      void* ptr = allocator.allocate(size, stream);
      REQUIRE(ptr != nullptr);
      REQUIRE(allocator.owns(ptr));
      REQUIRE(allocator.block_size(ptr).value_or(0) >= size);
      auto data = pattern(size, seed++);
      upload(*device, reinterpret_cast<DevicePtr>(ptr), data, stream);
      REQUIRE(live.emplace(ptr, std::move(data)).second);
    }
    // Free every other block, so later rounds reuse and split cached memory.
    bool drop = false;
    for (auto it = live.begin(); it != live.end();) {
      if ((drop = !drop)) {
        allocator.deallocate(it->first);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    allocator.check_invariants();
  }
  for (const auto& [ptr, data] : live) {
    CHECK(download(*device, reinterpret_cast<DevicePtr>(ptr), data.size(), stream) == data);
  }
  const AllocatorStats stats = allocator.stats();
  CHECK(stats.cache_hits > 0);
  CHECK(stats.allocated_bytes >= stats.requested_bytes);
  CHECK(stats.reserved_bytes >= stats.allocated_bytes);
  for (const auto& entry : live) allocator.deallocate(entry.first);
  CHECK(allocator.stats().allocated_bytes == 0);
  allocator.empty_cache();
  allocator.check_invariants();
  device->destroy_stream(stream);
}

TEST_CASE("packed blocks share a page, leave and come back at their address, and keep their bytes") {
  auto device = make_cuda_device(0);
  CachingAllocator allocator(device, AllocatorConfig{});
  const StreamHandle stream = device->create_stream();
  const std::size_t page = device->granularity();
  const Placement packed{.own_pages = true, .packed = true};
  // Three blocks of a page and a half, side by side: the first two share a page.
  const std::size_t size = page + page / 2;
  void* blocks[3];
  std::vector<std::uint8_t> data[3];
  for (int k = 0; k < 3; ++k) {
    blocks[k] = allocator.allocate(size, stream, packed);
    data[k] = pattern(size, 100 + k);
    upload(*device, reinterpret_cast<DevicePtr>(blocks[k]), data[k], stream);
  }
  REQUIRE(reinterpret_cast<DevicePtr>(blocks[1]) == reinterpret_cast<DevicePtr>(blocks[0]) + size);
  const std::size_t reserved = allocator.stats().reserved_bytes;
  // The middle one leaves: only the page it has alone goes, its neighbours keep every byte.
  CHECK(allocator.unmap_pages(blocks[1], 0, size) == page);
  allocator.check_invariants();
  CHECK(allocator.stats().reserved_bytes == reserved - page);
  CHECK(download(*device, reinterpret_cast<DevicePtr>(blocks[0]), size, stream) == data[0]);
  CHECK(download(*device, reinterpret_cast<DevicePtr>(blocks[2]), size, stream) == data[2]);
  // The first leaves too: its page shared with the middle one, away, goes with it.
  CHECK(allocator.unmap_pages(blocks[0], 0, size) > 0);
  allocator.check_invariants();
  // Both come back at their addresses, copied in, and read back whole.
  for (int k : {0, 1}) {
    allocator.map_pages(blocks[k], 0, size);
    upload(*device, reinterpret_cast<DevicePtr>(blocks[k]), data[k], stream);
  }
  allocator.check_invariants();
  for (int k = 0; k < 3; ++k)
    CHECK(download(*device, reinterpret_cast<DevicePtr>(blocks[k]), size, stream) == data[k]);
  CHECK(allocator.stats().reserved_bytes == reserved);
  for (void* b : blocks) allocator.deallocate(b);
  allocator.check_invariants();
  allocator.empty_cache();
  CHECK(allocator.stats().reserved_bytes == 0);
  device->destroy_stream(stream);
}

TEST_CASE("record_stream keeps a block from reuse until the other stream is done") {
  auto device = make_cuda_device(0);
  CachingAllocator allocator(device, AllocatorConfig{});
  const StreamHandle home = device->create_stream();
  const StreamHandle other = device->create_stream();
  const std::size_t size = 8 << 20;

  void* ptr = allocator.allocate(size, home);
  const auto data = pattern(size, 42);
  upload(*device, reinterpret_cast<DevicePtr>(ptr), data, home);
  // Queue a long read of the block on the other stream, then free it from the home stream.
  std::vector<std::uint8_t> sink(size);
  for (int i = 0; i < 8; ++i) {
    device->copy_d2h_async(sink.data(), reinterpret_cast<DevicePtr>(ptr), size, other);
  }
  allocator.record_stream(ptr, other);
  allocator.deallocate(ptr);
  allocator.check_invariants();

  // A new block on the home stream, overwritten at once: had it been handed the block the
  // other stream still reads, the reads would see 0xEE.
  void* again = allocator.allocate(size, home);
  REQUIRE(again != nullptr);
  device->memset_async(reinterpret_cast<DevicePtr>(again), 0xEE, size, home);
  device->synchronize_stream(other);
  device->synchronize_stream(home);
  CHECK(sink == data);
  allocator.deallocate(again);
  CHECK(allocator.stats().allocated_bytes == 0);
  allocator.check_invariants();
  device->destroy_stream(home);
  device->destroy_stream(other);
}

TEST_CASE("an impossible request is an OutOfMemoryError that says why") {
  auto device = make_cuda_device(0);
  CachingAllocator allocator(device, AllocatorConfig{});
  const std::size_t too_much = device->mem_info().total_bytes * 2;
  try {
    allocator.allocate(too_much, 0);
    FAIL("allocating twice the device's memory succeeded");
  } catch (const OutOfMemoryError& error) {
    CHECK(std::string(error.what()).find("out of memory") != std::string::npos);
  }
  void* small = allocator.allocate(1 << 20, 0);
  CHECK(small != nullptr);
  allocator.deallocate(small);
  allocator.check_invariants();
}
