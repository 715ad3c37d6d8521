// The cuda device on a real GPU: VMM at a stable address with data surviving unmap/remap,
// streams and events, default-stream handles, pinned memory, errors and context handling.
#include "gpu_test_support.hpp"

#include <delta/device.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

using namespace delta;
using gpu_test::download;
using gpu_test::pattern;
using gpu_test::upload;

namespace {

std::shared_ptr<Device> open_device() {
  auto device = make_cuda_device(0);
  REQUIRE(device);
  return device;
}

}  // namespace

TEST_CASE("the device describes itself") {
  auto device = open_device();
  CHECK(device->kind() == "cuda");
  CHECK(device->ordinal() == 0);
  const std::size_t unit = device->granularity();
  CHECK(unit >= (64u << 10));
  CHECK((unit & (unit - 1)) == 0);
  CHECK(device->granularity() == unit);
  const MemInfo info = device->mem_info();
  CHECK(info.total_bytes > 0);
  CHECK(info.free_bytes <= info.total_bytes);
}

TEST_CASE("physical pages keep their bytes across unmap and remap at a stable address") {
  auto device = open_device();
  const std::size_t unit = device->granularity();
  const StreamHandle stream = device->create_stream();

  const DevicePtr va = device->reserve(4 * unit);
  REQUIRE(va != 0);
  CHECK(va % unit == 0);
  const PhysHandle first = device->create_physical(unit);
  const PhysHandle second = device->create_physical(unit);
  CHECK(first != second);

  const auto data_first = pattern(unit, 1);
  const auto data_second = pattern(unit, 2);

  device->map(va, unit, first);
  upload(*device, va, data_first, stream);
  CHECK(download(*device, va, unit, stream) == data_first);
  device->unmap(va, unit);

  // Another page at the same address: the address is stable, the contents are the page's.
  device->map(va, unit, second);
  upload(*device, va, data_second, stream);
  device->unmap(va, unit);

  device->map(va, unit, first);
  CHECK(download(*device, va, unit, stream) == data_first);
  // The same page seen at a second address of the reservation at the same time.
  device->map(va + 2 * unit, unit, second);
  CHECK(download(*device, va + 2 * unit, unit, stream) == data_second);

  // memset and device-to-device copies land where they should, and only there.
  device->memset_async(va + 16, 0xAB, 100, stream);
  device->copy_d2d_async(va + 2 * unit + 4096, va, 4096, stream);
  auto expected_first = data_first;
  std::fill(expected_first.begin() + 16, expected_first.begin() + 116, 0xAB);
  auto expected_second = data_second;
  std::copy(expected_first.begin(), expected_first.begin() + 4096, expected_second.begin() + 4096);
  CHECK(download(*device, va, unit, stream) == expected_first);
  CHECK(download(*device, va + 2 * unit, unit, stream) == expected_second);

  device->unmap(va, unit);
  device->unmap(va + 2 * unit, unit);
  device->release_physical(first);
  device->release_physical(second);
  device->release_reservation(va, 4 * unit);
  device->destroy_stream(stream);
}

TEST_CASE("a multi-page mapping is one unit") {
  auto device = open_device();
  const std::size_t unit = device->granularity();
  const DevicePtr va = device->reserve(8 * unit);
  const PhysHandle pages = device->create_physical(3 * unit);
  device->map(va + unit, 3 * unit, pages);
  const auto data = pattern(3 * unit, 7);
  upload(*device, va + unit, data, 0);
  CHECK(download(*device, va + unit, 3 * unit, 0) == data);
  device->unmap(va + unit, 3 * unit);
  device->release_physical(pages);
  device->release_reservation(va, 8 * unit);
}

TEST_CASE("bad requests become DeviceErrors with the right codes") {
  auto device = open_device();
  const std::size_t unit = device->granularity();

  SECTION("sizes that are not multiples of the granularity") {
    try {
      device->reserve(unit + 1);
      FAIL("reserve accepted an unaligned size");
    } catch (const DeviceError& error) {
      CHECK(error.code() == DeviceErrc::invalid_value);
    }
    CHECK_THROWS_AS(device->create_physical(0), DeviceError);
  }

  SECTION("physical memory beyond the device's capacity is out_of_memory") {
    const MemInfo info = device->mem_info();
    const std::size_t too_much = (info.total_bytes / unit + 16) * unit;
    try {
      const PhysHandle handle = device->create_physical(too_much);
      device->release_physical(handle);
      FAIL("cuMemCreate of more than the device holds succeeded");
    } catch (const DeviceError& error) {
      INFO(error.what());
      CHECK(error.code() == DeviceErrc::out_of_memory);
      CHECK(std::string(error.what()).find("cuMemCreate") != std::string::npos);
      CHECK(std::string(error.what()).find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos);
    }
  }

  SECTION("unmapping what is not mapped, and mapping twice") {
    const DevicePtr va = device->reserve(2 * unit);
    // Driver 580 (H200) answers cuMemUnmap of a reserved range with no mapping in it with
    // success, and the cuda device passes the driver's answer on (the sim device refuses it).
    // Either way it must leave the range usable.
    try {
      device->unmap(va, unit);
    } catch (const DeviceError& error) {
      INFO(error.what());
      CHECK(error.code() != DeviceErrc::out_of_memory);
    }
    const PhysHandle handle = device->create_physical(unit);
    device->map(va, unit, handle);
    CHECK_THROWS_AS(device->map(va, unit, handle), DeviceError);
    device->unmap(va, unit);
    device->release_physical(handle);
    device->release_reservation(va, 2 * unit);
  }

  SECTION("default streams cannot be destroyed, handle 0 is no event") {
    CHECK_THROWS_AS(device->destroy_stream(0), DeviceError);
    CHECK_THROWS_AS(device->destroy_stream(kLegacyStream), DeviceError);
    CHECK_THROWS_AS(device->query_event(0), DeviceError);
  }
}

TEST_CASE("events order work across streams") {
  auto device = open_device();
  const std::size_t unit = device->granularity();
  const std::size_t bytes = 16 * unit;
  const DevicePtr va = device->reserve(2 * bytes);
  const PhysHandle a = device->create_physical(bytes);
  const PhysHandle b = device->create_physical(bytes);
  device->map(va, bytes, a);
  device->map(va + bytes, bytes, b);

  void* pinned = device->alloc_pinned(bytes);
  REQUIRE(pinned != nullptr);
  const auto data = pattern(bytes, 3);
  std::copy(data.begin(), data.end(), static_cast<std::uint8_t*>(pinned));

  const StreamHandle producer = device->create_stream();
  const StreamHandle consumer = device->create_stream();
  const EventHandle uploaded = device->create_event();
  const EventHandle copied = device->create_event();

  // Upload on one stream; the other waits for it, then copies to the second page set.
  device->copy_h2d_async(va, pinned, bytes, producer);
  device->record_event(uploaded, producer);
  device->stream_wait_event(consumer, uploaded);
  device->copy_d2d_async(va + bytes, va, bytes, consumer);
  device->record_event(copied, consumer);
  device->synchronize_event(copied);
  CHECK(device->query_event(copied));
  CHECK(device->query_event(uploaded));
  CHECK(download(*device, va + bytes, bytes, consumer) == data);

  // The default-stream handles are real streams to the driver.
  for (StreamHandle stream : {StreamHandle{0}, kLegacyStream, kPerThreadStream}) {
    device->memset_async(va, static_cast<std::uint8_t>(stream + 1), 4096, stream);
    device->synchronize_stream(stream);
    const auto bytes_back = download(*device, va, 4096, stream);
    CHECK(std::all_of(bytes_back.begin(), bytes_back.end(),
                      [&](std::uint8_t v) { return v == static_cast<std::uint8_t>(stream + 1); }));
  }

  device->destroy_event(uploaded);
  device->destroy_event(copied);
  device->destroy_stream(producer);
  device->destroy_stream(consumer);
  device->free_pinned(pinned);
  device->unmap(va, bytes);
  device->unmap(va + bytes, bytes);
  device->release_physical(a);
  device->release_physical(b);
  device->release_reservation(va, 2 * bytes);
}

TEST_CASE("a thread with no current context gets the primary context") {
  auto device = open_device();
  const std::size_t unit = device->granularity();
  const DevicePtr va = device->reserve(unit);
  const PhysHandle handle = device->create_physical(unit);
  device->map(va, unit, handle);
  const auto data = pattern(unit, 9);
  upload(*device, va, data, 0);

  std::vector<std::uint8_t> seen;
  std::string failure;
  std::thread worker([&] {
    try {
      seen = download(*device, va, unit, kPerThreadStream);
    } catch (const std::exception& error) {
      failure = error.what();
    }
  });
  worker.join();
  INFO(failure);
  CHECK(failure.empty());
  CHECK(seen == data);

  device->unmap(va, unit);
  device->release_physical(handle);
  device->release_reservation(va, unit);
}

TEST_CASE("synchronize waits for the work of a stream destroyed since, from any thread") {
  auto device = open_device();
  const std::size_t bytes = 128 * device->granularity();  // 256 MiB: milliseconds over PCIe
  const DevicePtr va = device->reserve(bytes);
  const PhysHandle handle = device->create_physical(bytes);
  device->map(va, bytes, handle);
  const auto data = pattern(bytes, 5);
  upload(*device, va, data, 0);

  // The copy back lands in pinned memory read by the host alone: only the wait can order it.
  void* out = device->alloc_pinned(bytes);
  REQUIRE(out != nullptr);
  std::fill_n(static_cast<std::uint8_t*>(out), bytes, 0);
  const StreamHandle stream = device->create_stream();
  device->copy_d2h_async(out, va, bytes, stream);
  device->destroy_stream(stream);
  std::string failure;
  std::thread waiter([&] {  // a thread with no current context
    try {
      device->synchronize();
    } catch (const std::exception& error) {
      failure = error.what();
    }
  });
  waiter.join();
  INFO(failure);
  CHECK(failure.empty());
  const auto* back = static_cast<const std::uint8_t*>(out);
  CHECK(std::equal(data.begin(), data.end(), back));

  device->free_pinned(out);
  device->unmap(va, bytes);
  device->release_physical(handle);
  device->release_reservation(va, bytes);
}
