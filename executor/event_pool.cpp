#include "executor/event_pool.hpp"

#include <algorithm>

namespace delta::executor {

EventPool::~EventPool() {
  try {
    for (EventHandle e : free_) device_.destroy_event(e);
    for (EventHandle e : retired_) device_.destroy_event(e);
  } catch (...) {  // a device already torn down: nothing left to give back
  }
}

EventHandle EventPool::take() {
  if (free_.empty()) {
    auto done = std::partition(retired_.begin(), retired_.end(), [&](EventHandle e) { return !device_.query_event(e); });
    free_.insert(free_.end(), done, retired_.end());
    retired_.erase(done, retired_.end());
  }
  if (free_.empty()) return device_.create_event();
  const EventHandle e = free_.back();
  free_.pop_back();
  return e;
}

void EventPool::retire(EventHandle& event) {
  if (event != 0) retired_.push_back(event);
  event = 0;
}

void EventPool::all_completed() {
  free_.insert(free_.end(), retired_.begin(), retired_.end());
  retired_.clear();
}

}  // namespace delta::executor
