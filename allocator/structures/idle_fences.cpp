#include "allocator/structures/idle_fences.hpp"

#include <delta/allocator.hpp>

#include <unordered_set>

namespace delta::detail {

IdleFences::Stream& IdleFences::stream_for(StreamHandle stream) {
  for (Stream& s : streams_)
    if (s.stream == stream) return s;
  return streams_.emplace_back(Stream{stream, {}});
}

void IdleFences::retire_front(Stream& s) {
  spare_.push_back(s.fences.front().event);
  s.fences.pop_front();
}

void IdleFences::retire_done(Device& device, Stream& s) {
  while (!s.fences.empty() && device.query_event(s.fences.front().event)) retire_front(s);
}

std::uint64_t IdleFences::record(Device& device, StreamHandle stream) {
  Stream& s = stream_for(stream);
  EventHandle event = 0;
  try {
    retire_done(device, s);
    if (s.fences.size() >= kMaxPending) {  // the device far behind: wait for the oldest
      device.synchronize_event(s.fences.front().event);
      retire_front(s);
    }
    if (spare_.empty()) {
      event = device.create_event();
    } else {
      event = spare_.back();
      spare_.pop_back();
    }
    device.record_event(event, stream);
  } catch (const DeviceError&) {
    if (event) spare_.push_back(event);
    return kNone;  // the page waits for its whole stream instead
  }
  s.fences.push_back({next_seq_, event});
  return next_seq_++;
}

void synchronize_stream_or_device(Device& device, StreamHandle stream) {
  try {
    device.synchronize_stream(stream);
  } catch (const DeviceError& e) {
    if (e.code() != DeviceErrc::invalid_handle) throw;  // a failing device: not ours to hide
    // The stream is gone (its owner destroyed it after using the memory, as CUDA allows) or was
    // never one: whatever it queued finishes within a device-wide wait, which is what is needed.
    device.synchronize();
  }
}

void IdleFences::wait(Device& device, StreamHandle stream, std::uint64_t seq) {
  if (seq == kNone) {
    synchronize_stream_or_device(device, stream);
    return;
  }
  Stream& s = stream_for(stream);
  // Every fence before it completes first (one stream runs in order), so all of those go too.
  while (!s.fences.empty() && s.fences.front().seq <= seq) {
    device.synchronize_event(s.fences.front().event);
    retire_front(s);
  }
}

void IdleFences::destroy(Device& device) {
  for (Stream& s : streams_)
    while (!s.fences.empty()) retire_front(s);
  for (EventHandle e : spare_) device.destroy_event(e);
  spare_.clear();
}

void IdleFences::check() const {
  const auto broken = [](const std::string& rule) { throw InvariantError("allocator invariant broken: idle fences: " + rule); };
  std::unordered_set<EventHandle> events;
  for (EventHandle e : spare_)
    if (e == 0 || !events.insert(e).second) broken("a spare event is null or held twice");
  std::unordered_set<StreamHandle> streams;
  for (const Stream& s : streams_) {
    if (!streams.insert(s.stream).second) broken("a stream is listed twice");
    if (s.fences.size() > kMaxPending) broken("more fences pending on a stream than the most allowed");
    std::uint64_t last = kNone;
    for (const Fence& f : s.fences) {
      if (f.seq <= last || f.seq >= next_seq_) broken("sequence numbers not rising, or not yet given out");
      if (f.event == 0 || !events.insert(f.event).second) broken("a fence's event is null or held twice");
      last = f.seq;
    }
  }
  if (!on_ && (!streams_.empty())) broken("fences recorded while off");
}

}  // namespace delta::detail
