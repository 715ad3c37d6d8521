// The sim device's memory: VMM semantics, checked byte access, capacity and lazy backing.
#include <delta/sim_device.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <fstream>
#include <numeric>
#include <vector>

using namespace delta;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kPage = 2 * kMiB;

std::shared_ptr<SimDevice> make_sim(std::size_t capacity = 64 * kMiB, bool backed = true) {
  SimOptions options;
  options.capacity_bytes = capacity;
  options.back_memory = backed;
  auto device = std::dynamic_pointer_cast<SimDevice>(make_sim_device(options));
  REQUIRE(device != nullptr);
  return device;
}

DeviceErrc code_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const DeviceError& error) {
    return error.code();
  }
  FAIL("expected a DeviceError");
  return DeviceErrc::driver_error;
}

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const DeviceError& error) {
    return error.what();
  }
  FAIL("expected a DeviceError");
  return {};
}

std::vector<std::uint8_t> pattern(std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(seed + i * 31 + (i >> 9));
  return out;
}

std::vector<std::uint8_t> read_back(SimDevice& device, DevicePtr ptr, std::size_t bytes) {
  std::vector<std::uint8_t> out(bytes);
  device.read(ptr, out);
  return out;
}

// Compares without letting Catch print megabytes of bytes on a mismatch.
bool same_bytes(const std::vector<std::uint8_t>& actual, const std::vector<std::uint8_t>& expected) {
  if (actual.size() != expected.size()) {
    UNSCOPED_INFO("sizes differ: " << actual.size() << " vs " << expected.size());
    return false;
  }
  const auto [a, e] = std::mismatch(actual.begin(), actual.end(), expected.begin());
  if (a == actual.end()) return true;
  UNSCOPED_INFO("first difference at offset " << (a - actual.begin()) << ": " << int(*a) << " vs " << int(*e));
  return false;
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("sim reports its kind, granularity and capacity", "[sim][memory]") {
  auto device = make_sim(64 * kMiB);
  CHECK(device->kind() == "sim");
  CHECK(device->ordinal() == 0);
  CHECK(device->granularity() == kPage);
  const MemInfo info = device->mem_info();
  CHECK(info.total_bytes == 64 * kMiB);
  CHECK(info.free_bytes == 64 * kMiB);
  CHECK(as_sim(device.get()) == device.get());
}

TEST_CASE("capacity 0 means the profile's memory size", "[sim][memory]") {
  SimOptions options;
  options.profile = "A100";
  auto device = make_sim_device(options);
  CHECK(device->mem_info().total_bytes == gpu_profile("a100").memory_bytes);
  CHECK(as_sim(device.get())->profile().name == "a100");
  options.profile = "no-such-gpu";
  CHECK_THROWS_AS(make_sim_device(options), std::invalid_argument);
}

TEST_CASE("VMM happy path: reserve, create, map, access, unmap, release", "[sim][memory]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(3 * kPage);
  CHECK(va % kPage == 0);
  // Device addresses stay outside the host's user address space.
  CHECK(va >= (DevicePtr{1} << 47));
  CHECK_FALSE(device->is_mapped(va, 1));

  const PhysHandle first = device->create_physical(kPage);
  const PhysHandle second = device->create_physical(2 * kPage);
  CHECK(first != 0);
  CHECK(second != first);
  CHECK(device->mem_info().free_bytes == 64 * kMiB - 3 * kPage);

  device->map(va, kPage, first);
  device->map(va + kPage, 2 * kPage, second);
  CHECK(device->is_mapped(va, 3 * kPage));  // adjacent mappings read as one range

  // A write that straddles the two handles lands in both.
  const auto bytes = pattern(kPage, 7);
  device->write(va + kPage / 2, bytes);
  CHECK(same_bytes(read_back(*device, va + kPage / 2, kPage), bytes));

  device->unmap(va, kPage);
  CHECK_FALSE(device->is_mapped(va, 1));
  CHECK(device->is_mapped(va + kPage, 2 * kPage));
  device->unmap(va + kPage, 2 * kPage);
  device->release_physical(first);
  device->release_physical(second);
  device->release_reservation(va, 3 * kPage);

  const SimCounters counters = device->counters();
  CHECK(counters.maps == 2);
  CHECK(counters.unmaps == 2);
  CHECK(counters.physical_creates == 2);
  CHECK(counters.physical_releases == 2);
  CHECK(counters.physical_bytes_in_use == 0);
  CHECK(counters.physical_bytes_peak == 3 * kPage);
  CHECK(device->mem_info().free_bytes == 64 * kMiB);
}

TEST_CASE("data survives unmap and remap at a stable address", "[sim][memory]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(kPage);
  const PhysHandle a = device->create_physical(kPage);
  const PhysHandle b = device->create_physical(kPage);
  const auto bytes_a = pattern(kPage, 1);
  const auto bytes_b = pattern(kPage, 99);

  device->map(va, kPage, a);
  device->write(va, bytes_a);
  device->unmap(va, kPage);

  // Another handle at the same address shows its own (fresh, zeroed) bytes.
  device->map(va, kPage, b);
  CHECK(same_bytes(read_back(*device, va, kPage), std::vector<std::uint8_t>(kPage, 0)));
  device->write(va, bytes_b);
  device->unmap(va, kPage);

  device->map(va, kPage, a);
  CHECK(same_bytes(read_back(*device, va, kPage), bytes_a));
  device->unmap(va, kPage);
  device->map(va, kPage, b);
  CHECK(same_bytes(read_back(*device, va, kPage), bytes_b));
  device->unmap(va, kPage);
}

TEST_CASE("one handle mapped at two addresses shares its bytes", "[sim][memory]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(2 * kPage);
  const PhysHandle handle = device->create_physical(kPage);
  device->map(va, kPage, handle);
  device->map(va + kPage, kPage, handle);
  const auto bytes = pattern(4096, 3);
  device->write(va + 100, bytes);
  CHECK(same_bytes(read_back(*device, va + kPage + 100, 4096), bytes));
  device->unmap(va, kPage);
  device->unmap(va + kPage, kPage);
  device->release_physical(handle);
  CHECK(device->counters().physical_bytes_in_use == 0);
}

TEST_CASE("reserve and create_physical reject bad sizes", "[sim][memory][errors]") {
  auto device = make_sim();
  CHECK(code_of([&] { device->reserve(0); }) == DeviceErrc::invalid_value);
  CHECK(code_of([&] { device->reserve(kPage + 4096); }) == DeviceErrc::invalid_value);
  CHECK(code_of([&] { device->create_physical(0); }) == DeviceErrc::invalid_value);
  CHECK(code_of([&] { device->create_physical(kPage - 1); }) == DeviceErrc::invalid_value);
  CHECK_THAT(message_of([&] { device->create_physical(12345); }), Catch::Contains("12345") && Catch::Contains("granularity"));
  // Far more than the fake address range holds.
  CHECK(code_of([&] { device->reserve(std::size_t{1} << 62); }) == DeviceErrc::out_of_memory);
}

TEST_CASE("map rejects every malformed request", "[sim][memory][errors]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(4 * kPage);
  const PhysHandle small = device->create_physical(kPage);
  const PhysHandle large = device->create_physical(2 * kPage);

  SECTION("unknown handle") {
    CHECK(code_of([&] { device->map(va, kPage, 0xdead); }) == DeviceErrc::invalid_handle);
    CHECK_THAT(message_of([&] { device->map(va, kPage, 0xdead); }), Catch::Contains("0xdead"));
    CHECK(code_of([&] { device->map(va, kPage, 0); }) == DeviceErrc::invalid_handle);
  }
  SECTION("size differs from the handle's") {
    CHECK(code_of([&] { device->map(va, 2 * kPage, small); }) == DeviceErrc::invalid_value);
    CHECK(code_of([&] { device->map(va, kPage, large); }) == DeviceErrc::invalid_value);
  }
  SECTION("misaligned address") {
    CHECK(code_of([&] { device->map(va + 4096, kPage, small); }) == DeviceErrc::invalid_value);
  }
  SECTION("outside any reservation, or running off its end") {
    CHECK(code_of([&] { device->map(0x1000'0000, kPage, small); }) == DeviceErrc::invalid_value);
    CHECK(code_of([&] { device->map(va + 4 * kPage, kPage, small); }) == DeviceErrc::invalid_value);
    CHECK(code_of([&] { device->map(va + 3 * kPage, 2 * kPage, large); }) == DeviceErrc::invalid_value);
    CHECK(code_of([&] { device->map(va - kPage, kPage, small); }) == DeviceErrc::invalid_value);
  }
  SECTION("overlapping an existing mapping") {
    device->map(va + kPage, 2 * kPage, large);
    CHECK(code_of([&] { device->map(va + kPage, kPage, small); }) == DeviceErrc::already_mapped);
    CHECK(code_of([&] { device->map(va + 2 * kPage, kPage, small); }) == DeviceErrc::already_mapped);
    const PhysHandle other = device->create_physical(2 * kPage);
    CHECK(code_of([&] { device->map(va, 2 * kPage, other); }) == DeviceErrc::already_mapped);
    // The free pages on both sides still map.
    device->map(va, kPage, small);
    device->map(va + 3 * kPage, kPage, device->create_physical(kPage));
    CHECK(device->is_mapped(va, 4 * kPage));
    CHECK(device->counters().maps == 3);
  }
  SECTION("a released handle") {
    device->release_physical(small);
    CHECK(code_of([&] { device->map(va, kPage, small); }) == DeviceErrc::invalid_handle);
  }
  // Failed maps leave nothing behind.
  if (device->counters().maps == 0) CHECK_FALSE(device->is_mapped(va, 1));
}

TEST_CASE("unmap must match exactly one mapping", "[sim][memory][errors]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(4 * kPage);
  const PhysHandle a = device->create_physical(2 * kPage);
  const PhysHandle b = device->create_physical(kPage);
  device->map(va, 2 * kPage, a);
  device->map(va + 2 * kPage, kPage, b);

  CHECK(code_of([&] { device->unmap(va + 3 * kPage, kPage); }) == DeviceErrc::not_mapped);
  CHECK_THAT(message_of([&] { device->unmap(va + 3 * kPage, kPage); }), Catch::Contains("nothing is mapped"));
  CHECK(code_of([&] { device->unmap(va, kPage); }) == DeviceErrc::invalid_value);       // part of a mapping
  CHECK(code_of([&] { device->unmap(va, 3 * kPage); }) == DeviceErrc::invalid_value);   // two mappings
  CHECK(code_of([&] { device->unmap(va + kPage, kPage); }) == DeviceErrc::invalid_value);  // middle
  CHECK(device->is_mapped(va, 3 * kPage));

  device->unmap(va, 2 * kPage);
  CHECK(code_of([&] { device->unmap(va, 2 * kPage); }) == DeviceErrc::not_mapped);  // twice
  CHECK(device->counters().unmaps == 1);
}

TEST_CASE("double release and unknown handles are reported with the value", "[sim][memory][errors]") {
  auto device = make_sim();
  const PhysHandle handle = device->create_physical(kPage);
  device->release_physical(handle);
  CHECK(code_of([&] { device->release_physical(handle); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->release_physical(0x12345678); }) == DeviceErrc::invalid_handle);
  CHECK_THAT(message_of([&] { device->release_physical(0x12345678); }), Catch::Contains("0x12345678"));
  CHECK(device->counters().physical_releases == 1);

  const DevicePtr va = device->reserve(kPage);
  CHECK(code_of([&] { device->release_reservation(va + kPage * 8, kPage); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->release_reservation(va, 2 * kPage); }) == DeviceErrc::invalid_value);
  device->release_reservation(va, kPage);
  CHECK(code_of([&] { device->release_reservation(va, kPage); }) == DeviceErrc::invalid_handle);
}

TEST_CASE("a reservation with live mappings cannot be released", "[sim][memory][errors]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(2 * kPage);
  const PhysHandle handle = device->create_physical(kPage);
  device->map(va + kPage, kPage, handle);
  CHECK(code_of([&] { device->release_reservation(va, 2 * kPage); }) == DeviceErrc::invalid_value);
  CHECK_THAT(message_of([&] { device->release_reservation(va, 2 * kPage); }), Catch::Contains("unmap"));
  device->unmap(va + kPage, kPage);
  device->release_reservation(va, 2 * kPage);
  CHECK(code_of([&] { device->map(va + kPage, kPage, handle); }) == DeviceErrc::invalid_value);
}

TEST_CASE("reservations never overlap and released ones are reused", "[sim][memory]") {
  auto device = make_sim();
  const DevicePtr a = device->reserve(kPage);
  const DevicePtr b = device->reserve(4 * kPage);
  const DevicePtr c = device->reserve(kPage);
  CHECK((b >= a + kPage || b + 4 * kPage <= a));
  CHECK((c >= b + 4 * kPage || c + kPage <= b));
  CHECK(c != a);
  // A pointer one past the end of a reservation never lands in the next one.
  const PhysHandle ha = device->create_physical(kPage);
  const PhysHandle hb = device->create_physical(kPage);
  device->map(a, kPage, ha);
  device->map(b, kPage, hb);
  CHECK_FALSE(device->is_mapped(a, kPage + 1));
  device->unmap(a, kPage);
  device->unmap(b, kPage);

  // Use up the rest of the address space, then release and reserve again: the space returns.
  device->release_reservation(a, kPage);
  device->release_reservation(b, 4 * kPage);
  device->release_reservation(c, kPage);
  std::size_t huge = std::size_t{1} << 45;  // 32 TiB
  const DevicePtr first = device->reserve(huge);
  const DevicePtr second = device->reserve(huge - 8 * kPage);
  CHECK(code_of([&] { device->reserve(std::size_t{1} << 44); }) == DeviceErrc::out_of_memory);
  device->release_reservation(first, huge);
  CHECK(device->reserve(huge / 2) == first);
  CHECK(device->reserve(huge / 4) == first + huge / 2 + kPage);  // after a guard page
  device->release_reservation(second, huge - 8 * kPage);
  const DevicePtr again = device->reserve(huge - 8 * kPage);
  CHECK((again >= first + huge / 2 + kPage + huge / 4 || again + huge - 8 * kPage <= first));
}

TEST_CASE("creating beyond capacity fails with out_of_memory and a clear message", "[sim][memory][errors]") {
  auto device = make_sim(8 * kMiB);
  const PhysHandle a = device->create_physical(6 * kMiB);
  CHECK(code_of([&] { device->create_physical(4 * kMiB); }) == DeviceErrc::out_of_memory);
  const std::string message = message_of([&] { device->create_physical(4 * kMiB); });
  CHECK_THAT(message, Catch::Contains("out of device memory") && Catch::Contains("4194304") &&
                          Catch::Contains("2097152 free"));
  const PhysHandle b = device->create_physical(2 * kMiB);  // exactly fills it
  CHECK(device->mem_info().free_bytes == 0);
  CHECK(code_of([&] { device->create_physical(kPage); }) == DeviceErrc::out_of_memory);
  device->release_physical(a);
  CHECK(device->mem_info().free_bytes == 6 * kMiB);
  device->create_physical(6 * kMiB);
  device->release_physical(b);
  CHECK(device->counters().physical_bytes_peak == 8 * kMiB);
}

TEST_CASE("a handle released while mapped is freed at its last unmap", "[sim][memory]") {
  auto device = make_sim(8 * kMiB);
  const DevicePtr va = device->reserve(2 * kPage);
  const PhysHandle handle = device->create_physical(kPage);
  device->map(va, kPage, handle);
  device->map(va + kPage, kPage, handle);
  const auto bytes = pattern(1000, 5);
  device->write(va, bytes);

  device->release_physical(handle);
  // Still counted and still readable through its mappings, as with the driver.
  CHECK(device->mem_info().free_bytes == 8 * kMiB - kPage);
  CHECK(same_bytes(read_back(*device, va + kPage, 1000), bytes));
  CHECK(code_of([&] { device->release_physical(handle); }) == DeviceErrc::invalid_handle);

  device->unmap(va, kPage);
  CHECK(device->mem_info().free_bytes == 8 * kMiB - kPage);
  device->unmap(va + kPage, kPage);
  CHECK(device->mem_info().free_bytes == 8 * kMiB);
  CHECK(device->counters().physical_bytes_in_use == 0);
}

TEST_CASE("every access outside the mapped bytes is refused", "[sim][memory][errors]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(3 * kPage);
  const PhysHandle a = device->create_physical(kPage);
  const PhysHandle c = device->create_physical(kPage);
  device->map(va, kPage, a);
  device->map(va + 2 * kPage, kPage, c);  // a hole in the middle page
  std::vector<std::uint8_t> buffer(2 * kPage, 0xAB);

  CHECK(code_of([&] { device->write(va + kPage - 10, std::span(buffer).first(20)); }) == DeviceErrc::not_mapped);
  const std::string message = message_of([&] { device->write(va + kPage - 10, std::span(buffer).first(20)); });
  CHECK_THAT(message, Catch::Contains("write") && Catch::Contains("offset 10"));
  CHECK(code_of([&] { device->read(va + kPage, std::span(buffer).first(1)); }) == DeviceErrc::not_mapped);
  CHECK(code_of([&] { device->read(0x1000, std::span(buffer).first(1)); }) == DeviceErrc::not_mapped);
  CHECK(code_of([&] { device->copy_h2d_async(va + kPage / 2, buffer.data(), kPage, 0); }) == DeviceErrc::not_mapped);
  CHECK(code_of([&] { device->copy_d2h_async(buffer.data(), va + 2 * kPage, kPage + 1, 0); }) == DeviceErrc::not_mapped);
  CHECK(code_of([&] { device->copy_d2d_async(va, va + kPage, 16, 0); }) == DeviceErrc::not_mapped);
  CHECK(code_of([&] { device->copy_d2d_async(va + kPage, va, 16, 0); }) == DeviceErrc::not_mapped);
  CHECK(code_of([&] { device->memset_async(va + 3 * kPage - 1, 0, 2, 0); }) == DeviceErrc::not_mapped);

  // A refused write changed nothing, not even the bytes that were mapped.
  CHECK(same_bytes(read_back(*device, va + kPage - 10, 10), std::vector<std::uint8_t>(10, 0)));
  CHECK(device->counters().bytes_h2d == 0);
  CHECK(device->stream_ready_ns(0) == 0);

  // After an unmap the bytes are out of reach again.
  device->write(va, std::span(buffer).first(16));
  device->unmap(va, kPage);
  CHECK(code_of([&] { device->read(va, std::span(buffer).first(16)); }) == DeviceErrc::not_mapped);
}

TEST_CASE("copies and memsets move bytes through the mappings", "[sim][memory]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(4 * kPage);
  for (int i = 0; i < 4; ++i) device->map(va + i * kPage, kPage, device->create_physical(kPage));

  const auto source = pattern(3 * kPage, 11);
  auto* pinned = static_cast<std::uint8_t*>(device->alloc_pinned(source.size()));
  std::copy(source.begin(), source.end(), pinned);
  // The host waits for each operation before it reads: read() of bytes a copy still writes is
  // a hazard (test_sim_device_hazards.cpp).
  device->copy_h2d_async(va + 123, pinned, source.size(), 0);
  device->synchronize_stream(0);
  CHECK(same_bytes(read_back(*device, va + 123, source.size()), source));

  // d2d across handle boundaries and larger than the staging chunk.
  device->copy_d2d_async(va + kPage / 2 + 7, va + 123, 5 * kMiB, 0);
  device->synchronize_stream(0);
  CHECK(same_bytes(read_back(*device, va + kPage / 2 + 7, 5 * kMiB), std::vector(source.begin(), source.begin() + 5 * kMiB)));

  device->memset_async(va + 10, 0x5A, kPage, 0);
  device->synchronize_stream(0);
  const auto filled = read_back(*device, va, kPage + 20);
  CHECK(filled[9] == 0);  // never written by any of the copies
  CHECK(filled[kPage + 10] == source[kPage / 2 + 3]);  // written by the d2d copy, past the memset
  CHECK(std::all_of(filled.begin() + 10, filled.begin() + 10 + kPage, [](std::uint8_t v) { return v == 0x5A; }));

  std::vector<std::uint8_t> out(kPage + 20);
  device->copy_d2h_async(out.data(), va, out.size(), 0);
  CHECK(same_bytes(out, filled));

  const SimCounters counters = device->counters();
  CHECK(counters.bytes_h2d == source.size());
  CHECK(counters.bytes_d2d == 5 * kMiB);
  CHECK(counters.bytes_d2h == out.size());
  device->free_pinned(pinned);
}

TEST_CASE("pinned host memory is tracked", "[sim][memory][errors]") {
  auto device = make_sim();
  CHECK(code_of([&] { device->alloc_pinned(0); }) == DeviceErrc::invalid_value);
  void* ptr = device->alloc_pinned(100);
  REQUIRE(ptr != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(ptr) % 4096 == 0);
  int on_stack = 0;
  CHECK(code_of([&] { device->free_pinned(&on_stack); }) == DeviceErrc::invalid_value);
  device->free_pinned(ptr);
  CHECK(code_of([&] { device->free_pinned(ptr); }) == DeviceErrc::invalid_value);
  device->free_pinned(nullptr);  // allowed, like cudaFreeHost(nullptr)
  CHECK(code_of([&] { device->copy_h2d_async(0x1000, nullptr, 8, 0); }) == DeviceErrc::invalid_value);
}

TEST_CASE("without backing the sim accounts but stores nothing", "[sim][memory]") {
  auto device = make_sim(64 * kMiB, /*backed=*/false);
  const DevicePtr va = device->reserve(kPage);
  const PhysHandle handle = device->create_physical(kPage);
  CHECK(device->mem_info().free_bytes == 64 * kMiB - kPage);
  std::vector<std::uint8_t> buffer(64, 1);

  // Mapping checks come first...
  CHECK(code_of([&] { device->write(va, buffer); }) == DeviceErrc::not_mapped);
  device->map(va, kPage, handle);
  // ...then host access is refused because there are no bytes to touch.
  CHECK(code_of([&] { device->write(va, buffer); }) == DeviceErrc::invalid_value);
  CHECK_THAT(message_of([&] { device->read(va, buffer); }), Catch::Contains("not backed"));
  // Copies still check and time themselves, so trace replays can run on it.
  device->copy_h2d_async(va, buffer.data(), buffer.size(), 0);
  device->copy_d2h_async(buffer.data(), va, buffer.size(), 0);
  device->memset_async(va, 0, kPage, 0);
  CHECK(code_of([&] { device->copy_h2d_async(va + kPage - 1, buffer.data(), 2, 0); }) == DeviceErrc::not_mapped);
  CHECK(device->counters().bytes_h2d == buffer.size());
  CHECK(device->stream_ready_ns(0) > 0);
}

TEST_CASE("untouched device memory costs no host RAM", "[sim][memory][backing]") {
  auto device = make_sim(100 * kGiB);
  const std::size_t before = resident_bytes();
  constexpr std::size_t kHandle = 4 * kGiB;
  constexpr int kHandles = 24;  // 96 GiB created and mapped
  const DevicePtr va = device->reserve(kHandles * kHandle);
  std::vector<PhysHandle> handles;
  for (int i = 0; i < kHandles; ++i) {
    handles.push_back(device->create_physical(kHandle));
    device->map(va + i * kHandle, kHandle, handles.back());
  }
  CHECK(device->mem_info().free_bytes == 100 * kGiB - kHandles * kHandle);
  const std::size_t after_create = resident_bytes();
  CHECK(after_create < before + 32 * kMiB);

  // Touching a few bytes in each handle costs about a page each, not the handle.
  const std::vector<std::uint8_t> small(16, 0x42);
  for (int i = 0; i < kHandles; ++i) device->write(va + i * kHandle + kHandle / 2, small);
  CHECK(resident_bytes() < before + 48 * kMiB);
  std::vector<std::uint8_t> out(16);
  device->read(va + 5 * kHandle + kHandle / 2, out);
  CHECK(out == small);

  for (int i = 0; i < kHandles; ++i) {
    device->unmap(va + i * kHandle, kHandle);
    device->release_physical(handles[i]);
  }
  device->release_reservation(va, kHandles * kHandle);
  CHECK(device->mem_info().free_bytes == 100 * kGiB);
}
