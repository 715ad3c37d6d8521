// The sim's virtual time: one host clock, one queue per stream, and events that remember the
// time their stream had reached when they were recorded.
//
// An operation issued on a stream starts when both the host has issued it (now) and the
// stream has finished its earlier work (ready), and the stream is then busy until it ends.
// Streams from create_stream are non-blocking (as PyTorch creates its streams): they never
// wait implicitly for the default streams. The legacy default stream (0 or kLegacyStream) and
// the per-thread default streams (kPerThreadStream, one per host thread) do synchronise with
// each other implicitly, as in CUDA.
//
// Not thread-safe on its own: the sim device serialises every call with its mutex.
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <unordered_map>

namespace delta::sim {

struct Interval {
  std::uint64_t start_ns = 0, end_ns = 0;
};

// Which queue a stream handle stands for: the per-thread default stream is a different queue
// on every host thread. Operations of one queue run in issue order, so they never race.
struct StreamIdentity {
  std::uint64_t queue = 0;
  std::string label;  // how messages name the stream
};

class SimClock {
 public:
  std::uint64_t now() const { return now_; }
  void advance(std::uint64_t ns) { now_ += ns; }

  StreamHandle create_stream();
  void destroy_stream(StreamHandle stream);
  // Throws DeviceError(invalid_handle) naming `operation` when the stream is unknown.
  void check_stream(const char* operation, StreamHandle stream) const;
  std::uint64_t ready(const char* operation, StreamHandle stream) const;
  // When work issued on `stream` would start if the host first spent `host_delay_ns`.
  std::uint64_t start_time(StreamHandle stream, std::uint64_t host_delay_ns) const;
  StreamIdentity identity(StreamHandle stream);
  // Queues `duration_ns` of work on the stream and returns when it runs.
  Interval issue(StreamHandle stream, std::uint64_t duration_ns);
  void synchronize_stream(StreamHandle stream);
  // Advances to when every stream, the default ones included, has finished its work.
  void synchronize_all();

  EventHandle create_event();
  void destroy_event(EventHandle event);
  void record_event(EventHandle event, StreamHandle stream);
  bool query_event(EventHandle event) const;
  void synchronize_event(EventHandle event);
  void stream_wait_event(StreamHandle stream, EventHandle event);

 private:
  struct Stream {
    std::uint64_t ready_ns = 0;
    std::uint64_t thread_index = 0;  // per-thread default streams: which host thread, from 1
  };
  struct Event {
    bool recorded = false;  // never recorded: complete, as in CUDA
    std::uint64_t time_ns = 0;
  };

  static bool is_legacy(StreamHandle stream) { return stream == 0 || stream == kLegacyStream; }
  Stream& stream_for(const char* operation, StreamHandle stream);
  const Event& event_for(const char* operation, EventHandle event) const;
  Event& event_for(const char* operation, EventHandle event);
  // When the work a default stream implicitly waits for completes (0 for other streams).
  std::uint64_t implicit_ready(StreamHandle stream) const;
  // The time a new operation on `stream` may start at the earliest, implicit waits included.
  std::uint64_t earliest_start(StreamHandle stream, const Stream& queue) const;

  std::uint64_t now_ = 0;
  std::uint64_t destroyed_ready_ns_ = 0;  // when the work of destroyed streams is done
  Stream legacy_;
  std::unordered_map<std::thread::id, Stream> per_thread_;
  std::uint64_t threads_seen_ = 0;
  std::unordered_map<StreamHandle, Stream> streams_;
  std::unordered_map<EventHandle, Event> events_;
  // Handles are never reused, so a stale handle is always reported as unknown; streams and
  // events come from different ranges so that passing one for the other is caught too.
  StreamHandle next_stream_ = 0x5100'0000'0010ULL;
  EventHandle next_event_ = 0xE100'0000'0010ULL;
};

}  // namespace delta::sim
