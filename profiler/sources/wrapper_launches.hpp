// Kernel launches recorded from DELTA's driver launch wrappers instead of CUPTI callbacks.
//
// Under LD_PRELOAD every launch of the process reaches a wrapper with its function and
// parameters (src/driver/driver_interpose.hpp), so the op can be recorded there: the kernel's symbol
// and parameter layout are cached per function by the caller, and the parameter words are
// looked up among the live blocks as CUPTI's path does (attribute_launch). What only CUPTI
// gives is the device duration, in activity records joined by correlation id; the id exists
// only inside the driver call, so CUPTI keeps one callback, on the driver's launch entry
// points, that binds the id to the op this thread's wrapper is forwarding (current_op()) and
// does nothing else. The runtime's launch callbacks, the decoding and the host-stub lookups of
// the callback path are gone. docs/recorder.md, "Launches from the wrappers".
#pragma once

#include "profiler/directions/launch_learning.hpp"
#include "profiler/recorder.hpp"

#include <atomic>
#include <cstdint>
#include <optional>

namespace delta::profiler {

class WrapperLaunches {
 public:
  explicit WrapperLaunches(Recorder& recorder) : recorder_(recorder) {}

  // Records the launch as an op; nullopt once the recording has finished. `call.params.layout`
  // null with kernelParams: the op is recorded without blocks (counted unattributed).
  std::optional<std::size_t> record(const KernelCall& call);
  bool recording() const { return !recorder_.finished(); }

  // The op of the launch this thread is forwarding to the driver, while a Forwarding lives.
  static std::optional<std::size_t> current_op() noexcept;
  class Forwarding {
   public:
    explicit Forwarding(std::optional<std::size_t> op) noexcept;
    ~Forwarding();
    Forwarding(const Forwarding&) = delete;
    Forwarding& operator=(const Forwarding&) = delete;

   private:
    std::optional<std::size_t> previous_;
  };

  std::uint64_t launches() const { return launches_.load(std::memory_order_relaxed); }
  std::uint64_t unattributed() const { return unattributed_.load(std::memory_order_relaxed); }

 private:
  Recorder& recorder_;
  std::atomic<std::uint64_t> launches_{0}, unattributed_{0};
};

}  // namespace delta::profiler
