// The events the executor records and waits on. One is handed out again only once the device
// has completed it: re-recording an event another stream may still wait on would move that
// wait (a stream waiting on a re-recorded event waits for the new work, not the old).
#pragma once

#include <delta/device.hpp>

#include <vector>

namespace delta::executor {

class EventPool {
 public:
  explicit EventPool(Device& device) : device_(device) {}
  ~EventPool();  // destroys every event it holds; the owner synchronizes the device first
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  EventHandle take();
  // Done with `event` (0 is ignored): it is pooled again once seen complete. Sets it to 0.
  void retire(EventHandle& event);
  // After a device synchronize: every retired event has completed and is free at once, so that
  // none needs a query later (a graph capture forbids event queries).
  void all_completed();

 private:
  Device& device_;
  std::vector<EventHandle> free_;
  std::vector<EventHandle> retired_;  // done with, not yet seen complete
};

}  // namespace delta::executor
