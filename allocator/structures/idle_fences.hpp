// Fences for idle pages. Reclaiming an idle page unmaps it, and work queued on the stream
// before its last block was freed may still be reading or writing its bytes, so the reclaim
// must wait for that work. Waiting for the whole stream also waits for everything queued since,
// which drains the host's lead over the device: under a budget cap the allocator reclaims a page
// for most new mappings, and BERT-Large at 0.7 of its peak ran 1.3 ms (2.7%) behind its plan on
// the sim device, 280 full waits a step, each leaving the device idle for a launch.
//
// Instead, a freed block whose pages go idle records one event on its stream (a fence), and the
// page keeps the fence's sequence number; a reclaim waits for that fence only, which has usually
// completed long before the least recently idle page is taken. Fences complete in the order they
// were recorded on one stream, so each stream's are kept in a queue, oldest first, and retired
// from the front once done. Off until the allocator first reclaims a page: jobs that never do
// record nothing.
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace delta::detail {

// Waits for `stream`'s work; where the device no longer knows the stream (destroyed by its owner
// after it used the memory, or never a stream), for the whole device instead.
void synchronize_stream_or_device(Device& device, StreamHandle stream);

class IdleFences {
 public:
  // Sequence number of no fence: the reclaim waits for the page's whole stream.
  static constexpr std::uint64_t kNone = 0;
  // Fences not yet known complete, per stream, at most: past it the oldest is waited for.
  static constexpr std::size_t kMaxPending = 1024;

  bool on() const { return on_; }
  void turn_on() { on_ = true; }

  // Records a fence on `stream` after the work queued so far; its sequence number, or kNone
  // where the device refuses the event (the page then waits for the whole stream).
  std::uint64_t record(Device& device, StreamHandle stream);

  // Waits until the work queued on `stream` before fence `seq` has completed (the whole
  // stream's work for kNone).
  void wait(Device& device, StreamHandle stream, std::uint64_t seq);

  // Gives every event back to the device (at shutdown, after the device has synchronised).
  void destroy(Device& device);

  // Throws InvariantError naming what is broken: sequence numbers rising along each queue,
  // below the next one to be given, and no event held twice.
  void check() const;

 private:
  struct Fence {
    std::uint64_t seq;
    EventHandle event;
  };
  struct Stream {
    StreamHandle stream;
    std::deque<Fence> fences;  // oldest first
  };
  Stream& stream_for(StreamHandle stream);
  // Retires the fences at the front of `s` that have completed.
  void retire_done(Device& device, Stream& s);
  void retire_front(Stream& s);

  bool on_ = false;
  std::uint64_t next_seq_ = 1;
  std::vector<Stream> streams_;  // a job uses a few streams: a short list, searched in order
  std::vector<EventHandle> spare_;
};

}  // namespace delta::detail
