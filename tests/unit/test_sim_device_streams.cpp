// The sim device's virtual clock: stream ordering, copy and kernel timing against the GPU
// profile, events, cross-stream waits, default-stream rules and the activity observer.
#include <delta/sim_device.hpp>

#include "device/sim/clock/sim_timing.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <thread>
#include <vector>

using namespace delta;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kPage = 2 * kMiB;

std::shared_ptr<SimDevice> make_sim(const std::string& profile = "h200") {
  SimOptions options;
  options.profile = profile;
  options.capacity_bytes = 256 * kMiB;
  return std::dynamic_pointer_cast<SimDevice>(make_sim_device(options));
}

// Maps `bytes` (rounded up to pages) of fresh memory and returns its address.
DevicePtr map_fresh(SimDevice& device, std::size_t bytes) {
  const std::size_t size = (bytes + kPage - 1) / kPage * kPage;
  const DevicePtr va = device.reserve(size);
  device.map(va, size, device.create_physical(size));
  return va;
}

// The model as documented in sim_timing.hpp, computed here from the profile's own figures.
std::uint64_t expected_ns(double bytes, double bytes_per_s) {
  return sim::kCopyLatencyNs + static_cast<std::uint64_t>(std::ceil(bytes * 1e9 / bytes_per_s));
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

struct Recorder {
  std::vector<SimDevice::Activity> seen;
  void attach(SimDevice& device) {
    device.set_activity_observer([this](const SimDevice::Activity& activity) { seen.push_back(activity); });
  }
};

}  // namespace

TEST_CASE("copy durations follow the profile's bandwidths", "[sim][time]") {
  auto device = make_sim("h200");
  const GpuProfile& profile = device->profile();
  constexpr std::size_t kBytes = 64 * kMiB;
  const DevicePtr va = map_fresh(*device, kBytes);
  const StreamHandle stream = device->create_stream();
  std::vector<std::uint8_t> pageable(kBytes);
  void* pinned = device->alloc_pinned(kBytes);

  // Worked once by hand, so the profile's figures are pinned down too: 64 MiB at 55 GB/s.
  CHECK(expected_ns(kBytes, profile.h2d_bytes_per_s) == sim::kCopyLatencyNs + 1220162);

  device->copy_h2d_async(va, pinned, kBytes, stream);
  std::uint64_t t = expected_ns(kBytes, profile.h2d_bytes_per_s);
  CHECK(device->stream_ready_ns(stream) == t);

  device->copy_h2d_async(va, pageable.data(), kBytes, stream);
  t += expected_ns(kBytes, profile.h2d_bytes_per_s * profile.pageable_factor);
  CHECK(device->stream_ready_ns(stream) == t);

  device->copy_d2h_async(pinned, va, kBytes, stream);
  t += expected_ns(kBytes, profile.d2h_bytes_per_s);
  CHECK(device->stream_ready_ns(stream) == t);

  device->copy_d2h_async(pageable.data(), va, kBytes, stream);
  t += expected_ns(kBytes, profile.d2h_bytes_per_s * profile.pageable_factor);
  CHECK(device->stream_ready_ns(stream) == t);

  // A host range that only starts inside a pinned block is not pinned as a whole.
  device->copy_d2h_async(static_cast<std::uint8_t*>(pinned) + kBytes / 2, va, kBytes / 2, stream);
  t += expected_ns(kBytes / 2, profile.d2h_bytes_per_s);
  CHECK(device->stream_ready_ns(stream) == t);

  // Device-side work moves every byte through HBM: a copy reads and writes, a memset writes.
  device->copy_d2d_async(va + kBytes / 2, va, kBytes / 2, stream);
  t += expected_ns(2.0 * (kBytes / 2), profile.d2d_bytes_per_s);
  CHECK(device->stream_ready_ns(stream) == t);

  device->memset_async(va, 0, kBytes, stream);
  t += expected_ns(kBytes, profile.d2d_bytes_per_s);
  CHECK(device->stream_ready_ns(stream) == t);

  // Copies cost the host nothing: the host clock has not moved.
  CHECK(device->now_ns() == 0);
  CHECK_FALSE(device->stream_ready_ns(stream) == 0);
  device->free_pinned(pinned);
}

TEST_CASE("initialise_async is a memset that takes no time", "[sim][time]") {
  constexpr std::size_t kBytes = 16 * kMiB;
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kBytes);
  const StreamHandle stream = device->create_stream();
  std::vector<SimDevice::Activity> seen;
  device->set_activity_observer([&](const SimDevice::Activity& a) { seen.push_back(a); });

  device->initialise_async(va, 0x5A, kBytes, stream);
  CHECK(device->stream_ready_ns(stream) == 1);  // 1 ns, not 1.5 us + 16 MiB at HBM bandwidth
  CHECK(device->now_ns() == 0);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].kind == SimDevice::Activity::Kind::memset);
  device->synchronize_stream(stream);
  std::vector<std::uint8_t> bytes(64);
  device->read(va + kBytes - 64, bytes);
  CHECK(bytes == std::vector<std::uint8_t>(64, 0x5A));

  // Stream-ordered and checked like a memset: after a long write on the stream, and a hazard
  // against unordered work on another stream.
  device->memset_async(va, 1, kBytes, stream);
  const std::uint64_t after = device->stream_ready_ns(stream);
  device->initialise_async(va, 2, kBytes, stream);
  CHECK(device->stream_ready_ns(stream) == after + 1);
  const StreamHandle other = device->create_stream();
  CHECK(code_of([&] { device->initialise_async(va, 3, kBytes, other); }) == DeviceErrc::hazard);
  const DevicePtr unmapped = va + 64 * kMiB;
  CHECK(code_of([&] { device->initialise_async(unmapped, 3, 16, stream); }) == DeviceErrc::not_mapped);
  device->set_activity_observer({});
}

TEST_CASE("slower profiles take longer for the same copy", "[sim][time]") {
  constexpr std::size_t kBytes = 16 * kMiB;
  std::vector<std::uint64_t> times;
  for (const char* name : {"h200", "a100", "v100", "titanv"}) {
    auto device = make_sim(name);
    const DevicePtr va = map_fresh(*device, kBytes);
    void* pinned = device->alloc_pinned(kBytes);
    device->copy_h2d_async(va, pinned, kBytes, 0);
    CHECK(device->stream_ready_ns(0) == expected_ns(kBytes, gpu_profile(name).h2d_bytes_per_s));
    times.push_back(device->stream_ready_ns(0));
    device->free_pinned(pinned);
  }
  CHECK(times[0] < times[1]);
  CHECK(times[1] < times[2]);
  CHECK(times[2] == times[3]);  // both Gen3 x16
}

TEST_CASE("work waits for both the host and its stream", "[sim][time]") {
  auto device = make_sim();
  const GpuProfile& profile = device->profile();
  const DevicePtr va = map_fresh(*device, 8 * kMiB);
  const StreamHandle a = device->create_stream();
  const StreamHandle b = device->create_stream();
  const std::uint64_t memset_ns = expected_ns(8 * kMiB, profile.d2d_bytes_per_s);

  device->memset_async(va, 1, 8 * kMiB, a);
  device->memset_async(va, 2, 8 * kMiB, a);
  CHECK(device->stream_ready_ns(a) == 2 * memset_ns);
  // Another stream is an independent queue: it starts at once (on other bytes: two streams
  // writing the same bytes unordered is a hazard).
  const DevicePtr other = map_fresh(*device, 8 * kMiB);
  device->memset_async(other, 3, 8 * kMiB, b);
  CHECK(device->stream_ready_ns(b) == memset_ns);

  // Work issued after the host moved on starts no earlier than the host.
  device->advance_ns(10 * memset_ns);
  CHECK(device->now_ns() == 10 * memset_ns);
  device->memset_async(va, 4, 8 * kMiB, a);
  CHECK(device->stream_ready_ns(a) == 11 * memset_ns);

  // A new stream is ready as of its creation.
  const StreamHandle c = device->create_stream();
  CHECK(device->stream_ready_ns(c) == device->now_ns());

  device->synchronize_stream(b);  // already done: the host does not go back
  CHECK(device->now_ns() == 10 * memset_ns);
  device->synchronize_stream(a);
  CHECK(device->now_ns() == 11 * memset_ns);
}

TEST_CASE("kernels run for their declared duration after the launch cost", "[sim][time]") {
  auto device = make_sim();
  const auto launch_ns = static_cast<std::uint64_t>(device->profile().launch_latency_ns);
  REQUIRE(launch_ns >= 1000);
  REQUIRE(launch_ns <= 10000);
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle stream = device->create_stream();
  SimLaunch kernel{"gemm", 50'000, {{va, 4096}}, {{va + 4096, 4096}}};

  device->launch(kernel, stream);
  CHECK(device->now_ns() == launch_ns);
  CHECK(device->stream_ready_ns(stream) == launch_ns + 50'000);
  device->launch(kernel, stream);  // queued behind the first one
  CHECK(device->now_ns() == 2 * launch_ns);
  CHECK(device->stream_ready_ns(stream) == launch_ns + 100'000);

  // Tiny kernels are bound by the launch cost.
  SimLaunch tiny{"tiny", 10, {}, {}};
  const StreamHandle other = device->create_stream();
  for (int i = 0; i < 10; ++i) device->launch(tiny, other);
  CHECK(device->now_ns() == 12 * launch_ns);
  CHECK(device->stream_ready_ns(other) == 12 * launch_ns + 10);
  CHECK(device->counters().kernels == 12);
}

TEST_CASE("a launch touching unmapped memory fails and changes nothing", "[sim][time][errors]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  SimLaunch bad_read{"reader", 100, {{va + kPage - 8, 16}}, {}};
  SimLaunch bad_write{"writer", 100, {{va, 8}}, {{va + 2 * kPage, 1}}};
  CHECK(code_of([&] { device->launch(bad_read, 0); }) == DeviceErrc::not_mapped);
  CHECK_THAT(message_of([&] { device->launch(bad_read, 0); }), Catch::Contains("reader") && Catch::Contains("offset 8"));
  CHECK(code_of([&] { device->launch(bad_write, 0); }) == DeviceErrc::not_mapped);
  CHECK(device->now_ns() == 0);
  CHECK(device->stream_ready_ns(0) == 0);
  CHECK(device->counters().kernels == 0);
  CHECK(code_of([&] { device->launch(SimLaunch{"k", 1, {}, {}}, 0x777); }) == DeviceErrc::invalid_handle);
}

TEST_CASE("events capture their stream's time and order other streams", "[sim][events]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, 32 * kMiB);
  const StreamHandle compute = device->create_stream();
  const StreamHandle copy = device->create_stream();
  const EventHandle event = device->create_event();
  CHECK(event != 0);

  // A never-recorded event counts as complete, as in CUDA.
  CHECK(device->query_event(event));
  device->synchronize_event(event);
  device->stream_wait_event(copy, event);
  CHECK(device->now_ns() == 0);
  CHECK(device->stream_ready_ns(copy) == 0);

  device->memset_async(va, 0, 32 * kMiB, compute);
  const std::uint64_t done = device->stream_ready_ns(compute);
  device->record_event(event, compute);
  CHECK_FALSE(device->query_event(event));

  // Work queued after the record does not delay the event.
  device->memset_async(va, 1, 32 * kMiB, compute);
  device->advance_ns(done - 1);
  CHECK_FALSE(device->query_event(event));
  device->advance_ns(1);
  CHECK(device->query_event(event));

  // The copy stream waits for the event: its next copy starts at the event's time at least.
  device->record_event(event, compute);  // re-recording moves it to the stream's new end
  const std::uint64_t second = device->stream_ready_ns(compute);
  CHECK_FALSE(device->query_event(event));
  device->stream_wait_event(copy, event);
  CHECK(device->stream_ready_ns(copy) == second);
  device->memset_async(va, 2, kPage, copy);
  CHECK(device->stream_ready_ns(copy) == second + expected_ns(kPage, device->profile().d2d_bytes_per_s));

  // Waiting on an event that is older than the stream's work changes nothing.
  const std::uint64_t copy_ready = device->stream_ready_ns(copy);
  device->stream_wait_event(copy, event);
  CHECK(device->stream_ready_ns(copy) == copy_ready);

  device->synchronize_event(event);
  CHECK(device->now_ns() == second);
  CHECK(device->query_event(event));
  device->destroy_event(event);
}

TEST_CASE("an event recorded on a destroyed stream keeps its time", "[sim][events]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle stream = device->create_stream();
  const EventHandle event = device->create_event();
  device->memset_async(va, 0, kPage, stream);
  const std::uint64_t end = device->stream_ready_ns(stream);
  device->record_event(event, stream);
  device->destroy_stream(stream);
  CHECK_FALSE(device->query_event(event));
  device->synchronize_event(event);
  CHECK(device->now_ns() == end);
}

TEST_CASE("the default streams: 0 is the legacy stream, per-thread streams sync with it", "[sim][streams]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, 8 * kMiB);
  const std::uint64_t memset_ns = expected_ns(8 * kMiB, device->profile().d2d_bytes_per_s);

  device->memset_async(va, 0, 8 * kMiB, 0);
  CHECK(device->stream_ready_ns(kLegacyStream) == memset_ns);  // same queue as 0
  device->memset_async(va, 0, 8 * kMiB, kLegacyStream);
  CHECK(device->stream_ready_ns(0) == 2 * memset_ns);

  // A created (non-blocking) stream does not wait for the legacy stream (so it works on other
  // bytes: two streams writing the same bytes unordered is a hazard)...
  const StreamHandle stream = device->create_stream();
  device->memset_async(map_fresh(*device, 8 * kMiB), 0, 8 * kMiB, stream);
  CHECK(device->stream_ready_ns(stream) == memset_ns);

  // ...but the per-thread default stream does, and the legacy stream waits for it in turn.
  CHECK(device->stream_ready_ns(kPerThreadStream) == 0);
  device->memset_async(va, 0, 8 * kMiB, kPerThreadStream);
  CHECK(device->stream_ready_ns(kPerThreadStream) == 3 * memset_ns);
  device->memset_async(va, 0, 8 * kMiB, 0);
  CHECK(device->stream_ready_ns(0) == 4 * memset_ns);

  // Each host thread has its own per-thread stream.
  std::uint64_t other_thread_ready = 1;
  std::thread([&] { other_thread_ready = device->stream_ready_ns(kPerThreadStream); }).join();
  CHECK(other_thread_ready == 0);
  std::thread([&] {
    device->memset_async(va, 0, 8 * kMiB, kPerThreadStream);
    other_thread_ready = device->stream_ready_ns(kPerThreadStream);
  }).join();
  CHECK(other_thread_ready == 5 * memset_ns);  // behind the legacy stream's work
  CHECK(device->stream_ready_ns(kPerThreadStream) == 3 * memset_ns);
}

TEST_CASE("unknown and destroyed streams and events are reported with their value", "[sim][streams][errors]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  const StreamHandle stream = device->create_stream();
  const EventHandle event = device->create_event();
  CHECK(stream != 0);
  CHECK(stream != kLegacyStream);
  CHECK(stream != kPerThreadStream);
  CHECK(device->create_stream() != stream);
  std::uint8_t host[16] = {};

  const StreamHandle bogus = 0xBAD5;
  CHECK(code_of([&] { device->synchronize_stream(bogus); }) == DeviceErrc::invalid_handle);
  CHECK_THAT(message_of([&] { device->synchronize_stream(bogus); }), Catch::Contains("0xbad5"));
  CHECK(code_of([&] { device->stream_ready_ns(bogus); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->copy_h2d_async(va, host, 16, bogus); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->copy_d2h_async(host, va, 16, bogus); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->copy_d2d_async(va, va + 16, 16, bogus); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->memset_async(va, 0, 16, bogus); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->record_event(event, bogus); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->stream_wait_event(bogus, event); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->destroy_stream(bogus); }) == DeviceErrc::invalid_handle);
  for (StreamHandle builtin : {StreamHandle{0}, kLegacyStream, kPerThreadStream}) {
    CHECK(code_of([&] { device->destroy_stream(builtin); }) == DeviceErrc::invalid_handle);
  }

  // Handles of one kind are not accepted as the other.
  CHECK(code_of([&] { device->query_event(stream); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->synchronize_stream(event); }) == DeviceErrc::invalid_handle);

  const EventHandle bogus_event = 0xE5E5;
  CHECK(code_of([&] { device->query_event(bogus_event); }) == DeviceErrc::invalid_handle);
  CHECK_THAT(message_of([&] { device->query_event(bogus_event); }), Catch::Contains("0xe5e5"));
  CHECK(code_of([&] { device->record_event(bogus_event, stream); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->synchronize_event(bogus_event); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->stream_wait_event(stream, bogus_event); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->destroy_event(bogus_event); }) == DeviceErrc::invalid_handle);

  device->destroy_stream(stream);
  CHECK(code_of([&] { device->memset_async(va, 0, 16, stream); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->destroy_stream(stream); }) == DeviceErrc::invalid_handle);
  device->destroy_event(event);
  CHECK(code_of([&] { device->record_event(event, 0); }) == DeviceErrc::invalid_handle);
  CHECK(code_of([&] { device->destroy_event(event); }) == DeviceErrc::invalid_handle);
  // A failed call moved no clock.
  CHECK(device->stream_ready_ns(0) == 0);
}

TEST_CASE("the activity observer sees every launch, copy and memset", "[sim][observer]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, 4 * kMiB);
  const StreamHandle stream = device->create_stream();
  Recorder recorder;
  recorder.attach(*device);
  std::vector<std::uint8_t> host(4096);

  device->launch(SimLaunch{"attention", 7'000, {{va, 1024}}, {{va + 1024, 2048}}}, stream);
  device->copy_h2d_async(va, host.data(), 4096, stream);
  device->copy_d2h_async(host.data(), va + 8192, 4096, stream);
  device->copy_d2d_async(va + 65536, va, 4096, stream);
  device->memset_async(va, 0, 512, stream);
  device->copy_h2d_async(va, host.data(), 0, stream);  // empty copies are not work

  REQUIRE(recorder.seen.size() == 5);
  using Kind = SimDevice::Activity::Kind;
  const auto& kernel = recorder.seen[0];
  CHECK(kernel.kind == Kind::kernel);
  CHECK(kernel.name == "attention");
  CHECK(kernel.stream == stream);
  CHECK(kernel.start_ns == static_cast<std::uint64_t>(device->profile().launch_latency_ns));
  CHECK(kernel.end_ns == kernel.start_ns + 7'000);
  REQUIRE(kernel.reads.size() == 1);
  CHECK(kernel.reads[0].ptr == va);
  CHECK(kernel.reads[0].bytes == 1024);
  REQUIRE(kernel.writes.size() == 1);
  CHECK(kernel.writes[0].ptr == va + 1024);

  CHECK(recorder.seen[1].kind == Kind::h2d);
  CHECK(recorder.seen[1].writes.at(0).ptr == va);
  CHECK(recorder.seen[1].reads.empty());
  CHECK(recorder.seen[2].kind == Kind::d2h);
  CHECK(recorder.seen[2].reads.at(0).ptr == va + 8192);
  CHECK(recorder.seen[3].kind == Kind::d2d);
  CHECK(recorder.seen[3].reads.at(0).ptr == va);
  CHECK(recorder.seen[3].writes.at(0).ptr == va + 65536);
  CHECK(recorder.seen[4].kind == Kind::memset);
  CHECK(recorder.seen[4].writes.at(0).bytes == 512);
  // Back to back on one stream.
  for (std::size_t i = 1; i < recorder.seen.size(); ++i) {
    CHECK(recorder.seen[i].start_ns == recorder.seen[i - 1].end_ns);
    CHECK(recorder.seen[i].end_ns > recorder.seen[i].start_ns);
  }
  CHECK(recorder.seen.back().end_ns == device->stream_ready_ns(stream));

  device->set_activity_observer({});
  device->memset_async(va, 0, 512, stream);
  CHECK(recorder.seen.size() == 5);
}

TEST_CASE("the observer may call back into the device", "[sim][observer]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  std::vector<std::uint64_t> ready_at_notification;
  device->set_activity_observer([&](const SimDevice::Activity& activity) {
    ready_at_notification.push_back(device->stream_ready_ns(activity.stream));
  });
  device->memset_async(va, 0, kPage, 0);
  device->memset_async(va, 0, kPage, 0);
  REQUIRE(ready_at_notification.size() == 2);
  CHECK(ready_at_notification[1] == device->stream_ready_ns(0));
  device->set_activity_observer(nullptr);
}

TEST_CASE("the launch hook runs before the launch and may make its memory resident", "[sim][hook]") {
  auto device = make_sim();
  const StreamHandle stream = device->create_stream();
  // The kernel's blocks are not mapped yet: the hook maps them, as a memory manager would.
  const DevicePtr va = device->reserve(kPage);
  std::vector<std::uint64_t> kernels_seen, now_seen;
  device->set_launch_hook([&](const SimLaunch& launch, StreamHandle on) {
    kernels_seen.push_back(device->counters().kernels);
    now_seen.push_back(device->now_ns());
    CHECK(on == stream);
    for (const SimRange& range : launch.reads) {
      if (!device->is_mapped(range.ptr, range.bytes)) device->map(va, kPage, device->create_physical(kPage));
    }
  });
  device->launch(SimLaunch{"needs memory", 1000, {{va, 4096}}, {}}, stream);
  device->launch(SimLaunch{"resident", 1000, {{va, 4096}}, {}}, stream);
  CHECK(kernels_seen == std::vector<std::uint64_t>{0, 1});  // before each launch counted
  CHECK(now_seen[0] == 0);  // before the launch's host cost
  CHECK(device->counters().kernels == 2);
  CHECK(device->counters().maps == 1);

  // Removed with an empty function.
  device->set_launch_hook({});
  device->launch(SimLaunch{"unhooked", 1000, {}, {}}, stream);
  CHECK(kernels_seen.size() == 2);
}

TEST_CASE("launches from inside the hook go straight to the device", "[sim][hook]") {
  auto device = make_sim();
  const DevicePtr va = map_fresh(*device, kPage);
  int hook_calls = 0;
  std::vector<std::string> launched;
  device->set_activity_observer([&](const SimDevice::Activity& activity) { launched.push_back(activity.name); });
  device->set_launch_hook([&](const SimLaunch& launch, StreamHandle stream) {
    hook_calls++;
    // A manager recomputing an evicted input first: a launch of its own, no recursion.
    device->launch(SimLaunch{"recompute for " + launch.name, 500, {}, {{va, 4096}}}, stream);
  });
  device->launch(SimLaunch{"consumer", 1000, {{va, 4096}}, {}}, 0);
  CHECK(hook_calls == 1);
  CHECK(launched == std::vector<std::string>{"recompute for consumer", "consumer"});
  device->set_launch_hook({});
  device->set_activity_observer({});
}

TEST_CASE("a hook that throws stops the launch", "[sim][hook]") {
  auto device = make_sim();
  device->set_launch_hook([](const SimLaunch&, StreamHandle) { throw DeviceError(DeviceErrc::out_of_memory, "no room"); });
  CHECK(code_of([&] { device->launch(SimLaunch{"k", 10, {}, {}}, 0); }) == DeviceErrc::out_of_memory);
  CHECK(device->counters().kernels == 0);
  CHECK(device->now_ns() == 0);
}
