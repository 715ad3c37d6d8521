// The simulated GPU's class: glues device memory (sim_memory), virtual time (sim_clock), pinned
// host memory (sim_pinned) and the hazard checker (sim_hazards) behind the SimDevice interface,
// under one mutex. An operation's effect on content is applied when it is issued; only its
// timing is virtual (see sim_timing.hpp), and the hazard checker refuses every ordering under
// which that shortcut would differ from a GPU.
//
// Its code is split by concern: sim_device.cpp (memory, streams, events, pinned memory,
// counters), sim_transfers.cpp (copies, memsets, host access), sim_launch.cpp (kernels and the
// launch hook). Private to device/sim; create_sim_device (sim_device_impl.hpp) builds it.
#pragma once

#include "device/sim/clock/sim_clock.hpp"
#include "device/sim/clock/sim_hazards.hpp"
#include "device/sim/memory/sim_memory.hpp"
#include "device/sim/memory/sim_pinned.hpp"

#include <delta/sim_device.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace delta::sim {

class SimDeviceImpl final : public SimDevice {
 public:
  SimDeviceImpl(const GpuProfile& profile, std::size_t capacity_bytes, const SimOptions& options, int ordinal);

  std::string_view kind() const noexcept override { return "sim"; }
  int ordinal() const noexcept override { return ordinal_; }
  const GpuProfile& profile() const override { return profile_; }
  SimContent content() const override { return memory_.content(); }
  std::size_t granularity() override { return kGranularity; }
  MemInfo mem_info() override;

  DevicePtr reserve(std::size_t size) override;
  void release_reservation(DevicePtr va, std::size_t size) override;
  PhysHandle create_physical(std::size_t size) override;
  void release_physical(PhysHandle handle) override;
  void map(DevicePtr va, std::size_t size, PhysHandle handle) override;
  void unmap(DevicePtr va, std::size_t size) override;

  StreamHandle create_stream() override;
  void destroy_stream(StreamHandle stream) override;
  void synchronize_stream(StreamHandle stream) override;
  void synchronize() override;
  EventHandle create_event() override;
  void destroy_event(EventHandle event) override;
  void record_event(EventHandle event, StreamHandle stream) override;
  bool query_event(EventHandle event) override;
  void synchronize_event(EventHandle event) override;
  void stream_wait_event(StreamHandle stream, EventHandle event) override;

  void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, StreamHandle stream) override;
  void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, StreamHandle stream) override;
  void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, StreamHandle stream) override;
  void memset_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) override;
  void initialise_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) override;

  void* alloc_pinned(std::size_t bytes) override;
  void free_pinned(void* ptr) override;

  std::uint64_t now_ns() const override;
  void advance_ns(std::uint64_t ns) override;
  std::uint64_t stream_ready_ns(StreamHandle stream) const override;

  void launch(const SimLaunch& launch, StreamHandle stream) override;
  void set_launch_hook(LaunchHook hook) override;

  void write(DevicePtr dst, std::span<const std::uint8_t> bytes) override;
  void read(DevicePtr src, std::span<std::uint8_t> out) override;
  std::uint64_t digest(DevicePtr ptr, std::size_t bytes) override;
  std::vector<std::uint64_t> fingerprint(std::span<const SimRange> ranges, StreamHandle stream) override;
  bool is_mapped(DevicePtr ptr, std::size_t bytes) const override;

  SimCounters counters() const override;
  void check_invariants() const override;
  void set_activity_observer(std::function<void(const Activity&)> observer) override;
  void inject_fault(SimFault fault, std::uint64_t count, std::uint64_t skip) override;

 private:
  // Throws the injected failure of `fault` for `operation` when one is due (sim_faults.cpp).
  void maybe_fail(SimFault fault, const char* operation);
  using Observer = std::function<void(const Activity&)>;
  // memset_async and initialise_async: the same fill, `duration_ns` on the device.
  void fill_async(const char* op, DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream,
                  std::uint64_t duration_ns);

  // An operation that passed its checks, hazards included, and is ready to be issued.
  struct Pending {
    std::shared_ptr<OpRecord> record;
    std::vector<Access> accesses;
    std::uint64_t host_delay_ns = 0;  // host time spent issuing it (a kernel's launch cost)
    std::uint64_t duration_ns = 0;
  };
  // Checks the accesses of `what` on `stream` against the work in flight (throws
  // DeviceError(hazard) before anything changed).
  Pending prepare(std::string what, StreamHandle stream, std::uint64_t host_delay_ns, std::uint64_t duration_ns,
                  std::vector<Access> accesses);
  // Queues it on its stream and remembers its accesses; returns what to tell the observer,
  // if there is one.
  std::optional<Activity> issue(const Pending& pending, Activity::Kind kind, const std::string& name,
                                StreamHandle stream, std::vector<SimRange> reads, std::vector<SimRange> writes);
  // The observer runs without the lock held, so that it may call back into the device.
  void notify(std::unique_lock<std::mutex> lock, std::optional<Activity> activity);

  // A copy's host side is tracked for hazards when it is pinned (pageable copies are staged
  // synchronously by CUDA, and the sim cannot see host code touching them anyway).
  void add_host_access(std::vector<Access>& accesses, const void* ptr, std::size_t bytes, bool write) const;
  // The host's synchronous access at `now` to device bytes, checked against work in flight.
  void check_host_access(const char* operation, DevicePtr ptr, std::size_t bytes, bool host_writes);
  static void require_host_pointer(const char* operation, const void* ptr);
  void require_backing(const char* operation, DevicePtr ptr) const;
  // The launch proper, once the hook (if any) has run.
  void launch_unhooked(const SimLaunch& launch, StreamHandle stream);

  mutable std::mutex mutex_;
  const GpuProfile profile_;
  const int ordinal_;
  const SimUnmapped on_unmapped_;
  SimMemory memory_;
  SimClock clock_;
  PinnedHostMemory pinned_;
  HazardTracker hazards_;
  std::uint64_t bytes_h2d_ = 0, bytes_d2h_ = 0, bytes_d2d_ = 0, kernels_ = 0, unmapped_accesses_ = 0;
  std::shared_ptr<const Observer> observer_;
  std::shared_ptr<const LaunchHook> hook_;
  struct InjectedFault {
    std::uint64_t skip = 0, count = 0;
  };
  InjectedFault faults_[kSimFaultKinds];
};

}  // namespace delta::sim
