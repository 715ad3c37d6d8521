// Orderings a real GPU would fault or corrupt data under, which the sim must refuse with
// DeviceErrc::hazard: an unmap under work in flight, accesses from two streams that overlap in
// address and time, the host touching bytes a device operation is still using. And the
// correctly ordered variants, which must pass.
#include <delta/sim_device.hpp>

#include "device/sim/clock/sim_hazards.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

using namespace delta;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;

std::shared_ptr<SimDevice> make_sim(SimUnmapped on_unmapped = SimUnmapped::fail, SimContent content = SimContent::bytes) {
  SimOptions options;
  options.capacity_bytes = 256 * kMiB;
  options.on_unmapped = on_unmapped;
  options.content = content;
  return std::dynamic_pointer_cast<SimDevice>(make_sim_device(options));
}

DevicePtr map_fresh(SimDevice& device, std::size_t bytes) {
  const std::size_t size = (bytes + kPage - 1) / kPage * kPage;
  const DevicePtr va = device.reserve(size);
  device.map(va, size, device.create_physical(size));
  return va;
}

// The hazard an action raises; fails the test when it raises none or another error.
std::string hazard_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const DeviceError& error) {
    CHECK(error.code() == DeviceErrc::hazard);
    return error.what();
  }
  FAIL("expected a hazard");
  return {};
}

std::string hex(std::uint64_t value) { return fmt::format("{:#x}", value); }

SimLaunch kernel(const std::string& name, std::uint64_t ns, std::vector<SimRange> reads, std::vector<SimRange> writes) {
  return SimLaunch{name, ns, std::move(reads), std::move(writes)};
}

}  // namespace

TEST_CASE("unmap under a kernel in flight is a hazard; after a synchronization it is not", "[sim][hazard]") {
  auto device = make_sim();
  const DevicePtr va = device->reserve(kPage);
  const PhysHandle handle = device->create_physical(kPage);
  device->map(va, kPage, handle);
  const StreamHandle stream = device->create_stream();
  const EventHandle done = device->create_event();
  device->launch(kernel("gemm", 1'000'000, {{va + 64, 4096}}, {}), stream);
  device->record_event(done, stream);
  const std::uint64_t end = device->stream_ready_ns(stream);

  const std::string message = hazard_of([&] { device->unmap(va, kPage); });
  CHECK_THAT(message, Catch::Contains("unmap(" + hex(va)) && Catch::Contains("launch of kernel 'gemm'") &&
                          Catch::Contains("stream " + hex(stream)) && Catch::Contains(hex(va + 64)) &&
                          Catch::Contains(std::to_string(end) + " ns") && Catch::Contains("reads"));
  CHECK(device->is_mapped(va, kPage));  // the refused unmap changed nothing

  SECTION("synchronize_stream") { device->synchronize_stream(stream); }
  SECTION("synchronize_event") { device->synchronize_event(done); }
  SECTION("synchronize") { device->synchronize(); }
  SECTION("a query_event that returned true") {
    device->advance_ns(end - device->now_ns() - 1);
    CHECK_FALSE(device->query_event(done));
    hazard_of([&] { device->unmap(va, kPage); });
    device->advance_ns(1);
    CHECK(device->query_event(done));
  }
  device->unmap(va, kPage);
  device->release_physical(handle);
  device->release_reservation(va, kPage);
  device->check_invariants();
}

TEST_CASE("unmapping bytes no work in flight touches is fine", "[sim][hazard]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, 2 * kPage);
  device->unmap(va, 2 * kPage);
  device->map(va, kPage, device->create_physical(kPage));
  device->map(va + kPage, kPage, device->create_physical(kPage));
  // A long kernel on the second page does not stop the first one from going.
  device->launch(kernel("long", 1'000'000'000, {}, {{va + kPage, 100}}), 0);
  device->unmap(va, kPage);
  hazard_of([&] { device->unmap(va + kPage, kPage); });
}

TEST_CASE("release_reservation under a launch on its unmapped addresses is a hazard", "[sim][hazard][unmapped]") {
  auto device = make_sim(SimUnmapped::count);
  const DevicePtr va = device->reserve(kPage);
  device->launch(kernel("stray", 50'000, {{va, 128}}, {}), 0);
  CHECK(device->counters().unmapped_accesses == 1);
  const std::string message = hazard_of([&] { device->release_reservation(va, kPage); });
  CHECK_THAT(message, Catch::Contains("release_reservation") && Catch::Contains("stray"));
  device->synchronize();
  device->release_reservation(va, kPage);
}

TEST_CASE("read-after-write across streams is a hazard unless an event orders it", "[sim][hazard]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle compute = device->create_stream(), copy = device->create_stream();
  std::vector<std::uint8_t> host(8192);
  device->launch(kernel("producer", 100'000, {}, {{va, 8192}}), compute);

  const std::string message = hazard_of([&] { device->copy_d2h_async(host.data(), va + 4096, 8192, copy); });
  CHECK_THAT(message, Catch::Contains("read-after-write") && Catch::Contains("copy_d2h_async on stream " + hex(copy)) &&
                          Catch::Contains("launch of kernel 'producer' on stream " + hex(compute)) &&
                          Catch::Contains("[" + hex(va + 4096) + ", " + hex(va + 8192) + ")"));
  // Other bytes, or the same stream, are fine.
  device->copy_d2h_async(host.data(), va + 8192, 4096, copy);
  device->copy_d2h_async(host.data(), va, 8192, compute);

  SECTION("ordered by an event") {
    const EventHandle produced = device->create_event();
    device->record_event(produced, compute);
    device->stream_wait_event(copy, produced);
    device->copy_d2h_async(host.data(), va + 4096, 8192, copy);
    device->launch(kernel("consumer", 10, {{va, 8192}}, {}), copy);
  }
  SECTION("or by the host waiting") {
    device->synchronize_stream(compute);
    device->copy_d2h_async(host.data(), va + 4096, 8192, copy);
  }
  device->synchronize();
  device->check_invariants();
}

TEST_CASE("write-after-read and write-after-write across streams are hazards; two reads are not", "[sim][hazard]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle s1 = device->create_stream(), s2 = device->create_stream();
  std::vector<std::uint8_t> host(4096, 1);

  const StreamHandle s3 = device->create_stream();
  device->launch(kernel("reader", 100'000, {{va, 4096}}, {}), s1);
  device->launch(kernel("another reader", 100'000, {{va, 4096}}, {}), s2);  // read and read: fine
  CHECK_THAT(hazard_of([&] { device->copy_h2d_async(va + 100, host.data(), 100, s3); }),
             Catch::Contains("write-after-read") && Catch::Contains("copy_h2d_async") && Catch::Contains("'reader'"));
  device->synchronize();

  device->memset_async(va, 0, 4096, s1);
  CHECK_THAT(hazard_of([&] { device->memset_async(va + 4095, 1, 2, s2); }),
             Catch::Contains("write-after-write") && Catch::Contains("memset_async on stream " + hex(s2)) &&
                 Catch::Contains("memset_async on stream " + hex(s1)));
  CHECK_THAT(hazard_of([&] { device->copy_d2d_async(va + 8192, va + 2048, 1024, s2); }), Catch::Contains("read-after-write"));
  CHECK_THAT(hazard_of([&] { device->copy_d2d_async(va + 2048, va + 8192, 1024, s2); }), Catch::Contains("write-after-write"));
  // A kernel reading and writing one range on the same stream as the memset: ordered.
  device->launch(kernel("in place", 10, {{va, 4096}}, {{va, 4096}}), s1);
  device->check_invariants();
}

TEST_CASE("work issued first but running later races work issued after it", "[sim][hazard]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle busy = device->create_stream(), idle = device->create_stream();
  device->launch(kernel("queue filler", 1'000'000, {}, {}), busy);
  device->launch(kernel("late writer", 1000, {}, {{va, 64}}), busy);  // runs after the filler
  // The idle stream's kernel runs first in virtual time, but nothing orders the two.
  CHECK_THAT(hazard_of([&] { device->launch(kernel("early reader", 1000, {{va, 64}}, {}), idle); }),
             Catch::Contains("'late writer'") && Catch::Contains("'early reader'"));
}

TEST_CASE("the host's read, digest and write of bytes in use by the device are hazards", "[sim][hazard]") {
  const SimContent mode = GENERATE(SimContent::bytes, SimContent::digest);
  auto device = make_sim(SimUnmapped::fail, mode);
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle stream = device->create_stream();
  std::vector<std::uint8_t> buffer(256, 7);

  device->copy_h2d_async(va, buffer.data(), 256, stream);
  CHECK_THAT(hazard_of([&] { device->read(va + 200, buffer); }),
             Catch::Contains("read(" + hex(va + 200)) && Catch::Contains("copy_h2d_async") && Catch::Contains("writes"));
  CHECK_THAT(hazard_of([&] { device->digest(va, 1); }), Catch::Contains("digest("));
  CHECK_THAT(hazard_of([&] { device->write(va + 255, std::span(buffer).first(1)); }), Catch::Contains("write("));
  device->read(va + 256, buffer);  // next to it: fine
  device->synchronize_stream(stream);
  device->read(va, buffer);
  CHECK(buffer[0] == 7);

  // Work that only reads blocks host writes, not host reads.
  device->launch(kernel("reader", 100'000, {{va, 256}}, {}), stream);
  device->read(va, buffer);
  (void)device->digest(va, 256);
  CHECK_THAT(hazard_of([&] { device->write(va, buffer); }), Catch::Contains("'reader'") && Catch::Contains("reads"));
  device->synchronize();
  device->write(va, buffer);
}

TEST_CASE("a refused operation changes nothing", "[sim][hazard]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle s1 = device->create_stream(), s2 = device->create_stream();
  int observed = 0;
  device->set_activity_observer([&](const SimDevice::Activity&) { observed++; });
  std::vector<std::uint8_t> host(64, 9);
  device->memset_async(va, 1, 64, s1);
  device->launch(kernel("still writing", 1'000'000, {}, {{va, 64}}), s1);  // keeps the bytes busy
  const std::uint64_t now = device->now_ns(), ready = device->stream_ready_ns(s2);
  const SimCounters before = device->counters();
  hazard_of([&] { device->copy_h2d_async(va, host.data(), 64, s2); });
  hazard_of([&] { device->launch(SimLaunch{"k", 10, {}, {{va, 64}}, 99}, s2); });
  CHECK(device->now_ns() == now);
  CHECK(device->stream_ready_ns(s2) == ready);
  CHECK(device->counters().bytes_h2d == before.bytes_h2d);
  CHECK(device->counters().kernels == before.kernels);
  CHECK(observed == 2);
  device->synchronize();
  std::vector<std::uint8_t> out(64);
  device->read(va, out);
  CHECK(out == std::vector<std::uint8_t>(64, 1));
  device->set_activity_observer({});
}

TEST_CASE("pinned host buffers are tracked like device memory", "[sim][hazard][pinned]") {
  const SimContent mode = GENERATE(SimContent::bytes, SimContent::digest);
  auto device = make_sim(SimUnmapped::fail, mode);
  const DevicePtr va = map_fresh(*device, 2 * kPage);
  const StreamHandle out = device->create_stream(), in = device->create_stream();
  auto* pinned = static_cast<std::uint8_t*>(device->alloc_pinned(kPage));
  device->copy_d2h_async(pinned, va, kPage, out);  // swap out...
  // ...and straight back in on another stream, before the copy out has finished.
  CHECK_THAT(hazard_of([&] { device->copy_h2d_async(va + kPage, pinned + 4096, 4096, in); }),
             Catch::Contains("read-after-write") && Catch::Contains("copy_d2h_async") &&
                 Catch::Contains(hex(reinterpret_cast<std::uintptr_t>(pinned) + 4096)));
  const EventHandle swapped = device->create_event();
  device->record_event(swapped, out);
  device->stream_wait_event(in, swapped);
  device->copy_h2d_async(va + kPage, pinned + 4096, 4096, in);
  // Pageable memory is not tracked: CUDA stages it synchronously.
  std::vector<std::uint8_t> pageable(4096);
  device->copy_d2h_async(pageable.data(), va, 4096, out);
  device->copy_h2d_async(va + kPage + 8192, pageable.data(), 4096, in);
  // free_pinned waits for the device, like cudaFreeHost.
  const std::uint64_t busy_until = std::max(device->stream_ready_ns(out), device->stream_ready_ns(in));
  device->free_pinned(pinned);
  CHECK(device->now_ns() >= busy_until);
}

TEST_CASE("per-thread default streams of two threads race; the legacy stream orders them", "[sim][hazard][streams]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  device->memset_async(va, 1, 4096, kPerThreadStream);
  // Catch's assertions belong to the main thread: the other one only keeps what it caught.
  std::optional<DeviceError> caught;
  std::thread([&] {
    try {
      device->memset_async(va, 2, 4096, kPerThreadStream);
    } catch (const DeviceError& error) {
      caught = error;
    }
  }).join();
  REQUIRE(caught.has_value());
  CHECK(caught->code() == DeviceErrc::hazard);
  CHECK_THAT(std::string(caught->what()), Catch::Contains("per-thread default stream of host thread #"));
  // The legacy stream waits for every per-thread stream, and they wait for it.
  device->memset_async(va, 3, 4096, 0);
  std::thread([&] { device->memset_async(va, 4, 4096, kPerThreadStream); }).join();
  device->synchronize();
  std::vector<std::uint8_t> out(1);
  device->read(va, out);
  CHECK(out[0] == 4);
}

TEST_CASE("thousands of operations in flight stay cheap to check", "[sim][hazard][scale]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, 32 * kMiB);
  std::vector<StreamHandle> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(device->create_stream());

  // The same range on one stream, over and over: one tracked range, not one per operation.
  for (int i = 0; i < 5000; ++i) device->launch(kernel("step", 1'000'000, {{va, 4096}}, {{va, 4096}}), streams[0]);
  CHECK(device->counters().hazard_ranges == 1);

  // Distinct ranges on several streams: one tracked range each (ranges of one stream that touch
  // are joined only when the same operation covers them).
  for (int i = 0; i < 4000; ++i) {
    const DevicePtr at = va + kMiB + static_cast<std::size_t>(i) * 4096;
    device->launch(kernel("tile", 1'000'000, {}, {{at, 4096}}), streams[1 + i % 3]);
  }
  CHECK(device->counters().hazard_ranges <= 4001);
  // A reduction over all the tiles, on a stream of its own, must wait for every tile's stream.
  const StreamHandle reducer = device->create_stream();
  const SimLaunch reduce = kernel("reduce", 1000, {{va + kMiB, 4000 * 4096}}, {});
  hazard_of([&] { device->launch(reduce, reducer); });
  for (int i = 1; i < 4; ++i) {
    const EventHandle event = device->create_event();
    device->record_event(event, streams[i]);
    device->stream_wait_event(reducer, event);
  }
  device->launch(reduce, reducer);
  device->check_invariants();
  // Once everything has finished, nothing is left to track.
  device->synchronize();
  device->launch(kernel("after", 10, {{va, 64}}, {}), streams[1]);
  CHECK(device->counters().hazard_ranges <= 1);
}

TEST_CASE("the hazard tracker agrees with a brute-force model", "[sim][hazard][model]") {
  struct Recorded {
    sim::OpRecord op;
    std::vector<sim::Access> accesses;
  };
  sim::HazardTracker tracker;
  std::vector<Recorded> model;
  std::mt19937_64 rng(23);
  std::uint64_t now = 0;
  std::uint64_t ready[4] = {};
  auto overlap = [](const sim::Access& a, const sim::Access& b) {
    return a.ptr < b.ptr + b.bytes && b.ptr < a.ptr + a.bytes;
  };
  int hazards = 0, host_hazards = 0;
  for (int step = 0; step < 20000; ++step) {
    INFO("step " << step);
    if (rng() % 10 == 0) {
      now += rng() % 300;
      // What ended can race nothing any more (everything later starts at `now` or after).
      std::erase_if(model, [&](const Recorded& r) { return r.op.end_ns <= now; });
    }
    const sim::Access access{1000 + rng() % 2000, 1 + rng() % 200, rng() % 2 == 0};
    if (rng() % 5 == 0) {  // the host
      bool expected = false;
      for (const Recorded& r : model) {
        for (const sim::Access& a : r.accesses) {
          expected |= r.op.end_ns > now && overlap(a, access) && (access.write || a.write);
        }
      }
      bool raised = false;
      try {
        tracker.check_host("host", access.ptr, access.bytes, access.write, now);
      } catch (const DeviceError&) {
        raised = true;
      }
      REQUIRE(raised == expected);
      host_hazards += raised;
      continue;
    }
    const int queue = static_cast<int>(rng() % 4);
    sim::OpRecord op{"op", "stream", static_cast<std::uint64_t>(queue + 1), now, 0, 0};
    op.start_ns = std::max(now, ready[queue]) + rng() % 50;
    op.end_ns = op.start_ns + rng() % 400;
    std::vector<sim::Access> accesses{access};
    if (rng() % 3 == 0) accesses.push_back({1000 + rng() % 2000, 1 + rng() % 100, rng() % 2 == 0});
    bool expected = false;
    for (const Recorded& r : model) {
      if (r.op.queue == op.queue || r.op.end_ns <= op.start_ns) continue;
      for (const sim::Access& a : r.accesses) {
        for (const sim::Access& b : accesses) expected |= overlap(a, b) && (a.write || b.write);
      }
    }
    bool raised = false;
    try {
      tracker.check_op(op, accesses, now);
    } catch (const DeviceError&) {
      raised = true;
    }
    REQUIRE(raised == expected);
    hazards += raised;
    if (!raised) {
      ready[queue] = op.end_ns;
      tracker.record(std::make_shared<const sim::OpRecord>(op), accesses, now);
      model.push_back({op, accesses});
    }
    if (step % 100 == 0) tracker.check_invariants();
  }
  tracker.check_invariants();
  // Both outcomes happened often enough for the comparison to mean something.
  CHECK(hazards > 500);
  CHECK(hazards < 15000);
  CHECK(host_hazards > 100);
}
