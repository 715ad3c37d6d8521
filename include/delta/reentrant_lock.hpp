// A mutex its owner may take again: the allocator's lock, which run mode's executor holds across
// each of its entry points while the allocator methods it calls take it once more.
//
// Re-entry by the owning thread costs a load and an increment, no atomic read-modify-write;
// a first acquisition costs what std::mutex costs. (glibc's recursive pthread mutex spends
// several times the instructions of a plain one on every call, which the allocator's fast path
// cannot afford.)
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

namespace delta {

class ReentrantLock {
 public:
  void lock() {
    const std::thread::id self = std::this_thread::get_id();
    // Only this thread ever stores its own id here, so seeing it means this thread holds the
    // lock; any other value (none, or another thread's, possibly stale) means it does not.
    if (owner_.load(std::memory_order_relaxed) == self) {
      ++depth_;
      return;
    }
    mutex_.lock();
    owner_.store(self, std::memory_order_relaxed);
    depth_ = 1;
  }
  bool try_lock() {
    const std::thread::id self = std::this_thread::get_id();
    if (owner_.load(std::memory_order_relaxed) == self) {
      ++depth_;
      return true;
    }
    if (!mutex_.try_lock()) return false;
    owner_.store(self, std::memory_order_relaxed);
    depth_ = 1;
    return true;
  }
  void unlock() {
    if (--depth_ != 0) return;
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    mutex_.unlock();
  }
  // True when the calling thread holds it (for assertions and invariant checks).
  bool held_by_this_thread() const { return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }

 private:
  std::mutex mutex_;
  std::atomic<std::thread::id> owner_{};
  std::uint32_t depth_ = 0;  // guarded by mutex_
};

}  // namespace delta
