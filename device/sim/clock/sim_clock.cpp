#include "device/sim/clock/sim_clock.hpp"

#include "device/sim/sim_errors.hpp"

#include <algorithm>
#include <utility>

namespace delta::sim {

namespace {
constexpr std::uint64_t kHandleStep = 0x10;
}  // namespace

StreamHandle SimClock::create_stream() {
  const StreamHandle stream = next_stream_;
  next_stream_ += kHandleStep;
  // A new stream has nothing queued: it is ready as of now.
  streams_.emplace(stream, Stream{now_});
  return stream;
}

void SimClock::destroy_stream(StreamHandle stream) {
  if (is_legacy(stream) || stream == kPerThreadStream) {
    fail(DeviceErrc::invalid_handle, "destroy_stream({}): the default streams cannot be destroyed", hex(stream));
  }
  // Work already queued still completes; events recorded on the stream keep their times.
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    fail(DeviceErrc::invalid_handle, "destroy_stream({}): unknown or destroyed stream", hex(stream));
  }
  destroyed_ready_ns_ = std::max(destroyed_ready_ns_, it->second.ready_ns);
  streams_.erase(it);
}

SimClock::Stream& SimClock::stream_for(const char* operation, StreamHandle stream) {
  if (is_legacy(stream)) return legacy_;
  if (stream == kPerThreadStream) {
    const auto [it, first_use] = per_thread_.try_emplace(std::this_thread::get_id());
    if (first_use) it->second.thread_index = ++threads_seen_;
    return it->second;
  }
  const auto it = streams_.find(stream);
  if (it == streams_.end()) fail(DeviceErrc::invalid_handle, "{}: unknown or destroyed stream {}", operation, hex(stream));
  return it->second;
}

void SimClock::check_stream(const char* operation, StreamHandle stream) const {
  if (is_legacy(stream) || stream == kPerThreadStream || streams_.count(stream) != 0) return;
  fail(DeviceErrc::invalid_handle, "{}: unknown or destroyed stream {}", operation, hex(stream));
}

std::uint64_t SimClock::ready(const char* operation, StreamHandle stream) const {
  check_stream(operation, stream);
  if (is_legacy(stream)) return legacy_.ready_ns;
  if (stream == kPerThreadStream) {
    const auto it = per_thread_.find(std::this_thread::get_id());
    return it == per_thread_.end() ? 0 : it->second.ready_ns;
  }
  return streams_.at(stream).ready_ns;
}

std::uint64_t SimClock::implicit_ready(StreamHandle stream) const {
  std::uint64_t ready = 0;
  if (is_legacy(stream)) {
    for (const auto& [thread, per_thread] : per_thread_) ready = std::max(ready, per_thread.ready_ns);
  } else if (stream == kPerThreadStream) {
    ready = legacy_.ready_ns;
  }
  return ready;
}

std::uint64_t SimClock::earliest_start(StreamHandle stream, const Stream& queue) const {
  return std::max({now_, queue.ready_ns, implicit_ready(stream)});
}

std::uint64_t SimClock::start_time(StreamHandle stream, std::uint64_t host_delay_ns) const {
  return std::max({now_ + host_delay_ns, ready("start_time", stream), implicit_ready(stream)});
}

StreamIdentity SimClock::identity(StreamHandle stream) {
  // Queue numbers: 1 for the legacy stream, the handle for created streams (never reused),
  // and a range of their own, far above any handle, for the per-thread default streams.
  constexpr std::uint64_t kPerThreadQueues = 0xF000'0000'0000'0000ULL;
  if (is_legacy(stream)) return {1, "the legacy default stream"};
  const Stream& queue = stream_for("identity", stream);
  if (stream == kPerThreadStream) {
    return {kPerThreadQueues + queue.thread_index,
            "the per-thread default stream of host thread #" + std::to_string(queue.thread_index)};
  }
  return {stream, "stream " + hex(stream)};
}

Interval SimClock::issue(StreamHandle stream, std::uint64_t duration_ns) {
  Stream& queue = stream_for("issue", stream);
  const std::uint64_t start = earliest_start(stream, queue);
  queue.ready_ns = start + duration_ns;
  return {start, queue.ready_ns};
}

void SimClock::synchronize_stream(StreamHandle stream) {
  now_ = std::max(now_, stream_for("synchronize_stream", stream).ready_ns);
}

void SimClock::synchronize_all() {
  now_ = std::max({now_, legacy_.ready_ns, destroyed_ready_ns_});
  for (const auto& [thread, queue] : per_thread_) now_ = std::max(now_, queue.ready_ns);
  for (const auto& [handle, queue] : streams_) now_ = std::max(now_, queue.ready_ns);
}

EventHandle SimClock::create_event() {
  const EventHandle event = next_event_;
  next_event_ += kHandleStep;
  events_.emplace(event, Event{});
  return event;
}

void SimClock::destroy_event(EventHandle event) {
  if (events_.erase(event) == 0) {
    fail(DeviceErrc::invalid_handle, "destroy_event({}): unknown or destroyed event", hex(event));
  }
}

const SimClock::Event& SimClock::event_for(const char* operation, EventHandle event) const {
  const auto it = events_.find(event);
  if (it == events_.end()) fail(DeviceErrc::invalid_handle, "{}: unknown or destroyed event {}", operation, hex(event));
  return it->second;
}

SimClock::Event& SimClock::event_for(const char* operation, EventHandle event) {
  return const_cast<Event&>(std::as_const(*this).event_for(operation, event));
}

void SimClock::record_event(EventHandle event, StreamHandle stream) {
  Event& target = event_for("record_event", event);
  const Stream& queue = stream_for("record_event", stream);
  // Recording is itself stream work, so on a default stream it includes the implicit waits;
  // it does not wait for the host clock, which only matters to work that takes time.
  target.recorded = true;
  target.time_ns = std::max(queue.ready_ns, implicit_ready(stream));
}

bool SimClock::query_event(EventHandle event) const {
  const Event& target = event_for("query_event", event);
  return !target.recorded || now_ >= target.time_ns;
}

void SimClock::synchronize_event(EventHandle event) {
  const Event& target = event_for("synchronize_event", event);
  if (target.recorded) now_ = std::max(now_, target.time_ns);
}

void SimClock::stream_wait_event(StreamHandle stream, EventHandle event) {
  const Event& target = event_for("stream_wait_event", event);
  Stream& queue = stream_for("stream_wait_event", stream);
  if (target.recorded) queue.ready_ns = std::max(queue.ready_ns, target.time_ns);
}

}  // namespace delta::sim
