// The simulated GPU: glues device memory (sim_memory), virtual time (sim_clock) and pinned
// host memory (sim_pinned) behind the Device interface, under one mutex. Bytes move eagerly
// when an operation is issued; only its timing is virtual (see sim_timing.hpp for the model).
#include "sim_clock.hpp"
#include "sim_device_impl.hpp"
#include "sim_errors.hpp"
#include "sim_memory.hpp"
#include "sim_pinned.hpp"
#include "sim_timing.hpp"

#include <mutex>
#include <optional>
#include <utility>

namespace delta::sim {

namespace {

using Activity = SimDevice::Activity;
using Observer = std::function<void(const Activity&)>;

class SimDeviceImpl final : public SimDevice {
 public:
  SimDeviceImpl(const GpuProfile& profile, std::size_t capacity_bytes, bool back_memory, int ordinal)
      : profile_(profile), ordinal_(ordinal), memory_(capacity_bytes, back_memory) {}

  std::string_view kind() const noexcept override { return "sim"; }
  int ordinal() const noexcept override { return ordinal_; }
  const GpuProfile& profile() const override { return profile_; }
  std::size_t granularity() override { return kGranularity; }

  MemInfo mem_info() override {
    std::lock_guard lock(mutex_);
    const std::size_t total = memory_.capacity();
    return {total - memory_.counters().physical_bytes_in_use, total};
  }

  // ---- virtual memory ----
  DevicePtr reserve(std::size_t size) override {
    std::lock_guard lock(mutex_);
    return memory_.reserve(size);
  }
  void release_reservation(DevicePtr va, std::size_t size) override {
    std::lock_guard lock(mutex_);
    memory_.release_reservation(va, size);
  }
  PhysHandle create_physical(std::size_t size) override {
    std::lock_guard lock(mutex_);
    return memory_.create_physical(size);
  }
  void release_physical(PhysHandle handle) override {
    std::lock_guard lock(mutex_);
    memory_.release_physical(handle);
  }
  void map(DevicePtr va, std::size_t size, PhysHandle handle) override {
    std::lock_guard lock(mutex_);
    memory_.map(va, size, handle);
  }
  void unmap(DevicePtr va, std::size_t size) override {
    std::lock_guard lock(mutex_);
    memory_.unmap(va, size);
  }

  // ---- streams and events ----
  StreamHandle create_stream() override {
    std::lock_guard lock(mutex_);
    return clock_.create_stream();
  }
  void destroy_stream(StreamHandle stream) override {
    std::lock_guard lock(mutex_);
    clock_.destroy_stream(stream);
  }
  void synchronize_stream(StreamHandle stream) override {
    std::lock_guard lock(mutex_);
    clock_.synchronize_stream(stream);
  }
  void synchronize() override {
    std::lock_guard lock(mutex_);
    clock_.synchronize_all();
  }
  EventHandle create_event() override {
    std::lock_guard lock(mutex_);
    return clock_.create_event();
  }
  void destroy_event(EventHandle event) override {
    std::lock_guard lock(mutex_);
    clock_.destroy_event(event);
  }
  void record_event(EventHandle event, StreamHandle stream) override {
    std::lock_guard lock(mutex_);
    clock_.record_event(event, stream);
  }
  bool query_event(EventHandle event) override {
    std::lock_guard lock(mutex_);
    return clock_.query_event(event);
  }
  void synchronize_event(EventHandle event) override {
    std::lock_guard lock(mutex_);
    clock_.synchronize_event(event);
  }
  void stream_wait_event(StreamHandle stream, EventHandle event) override {
    std::lock_guard lock(mutex_);
    clock_.stream_wait_event(stream, event);
  }

  // ---- copies and memsets ----
  void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, StreamHandle stream) override {
    std::unique_lock lock(mutex_);
    clock_.check_stream("copy_h2d_async", stream);
    if (bytes == 0) return;
    require_host_pointer("copy_h2d_async", src);
    memory_.copy_in("copy_h2d_async", dst, src, bytes);
    const bool pinned = pinned_.covers(src, bytes);
    bytes_h2d_ += bytes;
    auto activity = issue(Activity::Kind::h2d, "h2d", stream,
                          transfer_duration_ns(profile_, CopyKind::h2d, bytes, pinned), {}, {{dst, bytes}});
    notify(std::move(lock), std::move(activity));
  }

  void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, StreamHandle stream) override {
    std::unique_lock lock(mutex_);
    clock_.check_stream("copy_d2h_async", stream);
    if (bytes == 0) return;
    require_host_pointer("copy_d2h_async", dst);
    memory_.copy_out("copy_d2h_async", dst, src, bytes);
    const bool pinned = pinned_.covers(dst, bytes);
    bytes_d2h_ += bytes;
    auto activity = issue(Activity::Kind::d2h, "d2h", stream,
                          transfer_duration_ns(profile_, CopyKind::d2h, bytes, pinned), {{src, bytes}}, {});
    notify(std::move(lock), std::move(activity));
  }

  void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, StreamHandle stream) override {
    std::unique_lock lock(mutex_);
    clock_.check_stream("copy_d2d_async", stream);
    if (bytes == 0) return;
    memory_.copy_within("copy_d2d_async", dst, src, bytes);
    bytes_d2d_ += bytes;
    auto activity = issue(Activity::Kind::d2d, "d2d", stream,
                          transfer_duration_ns(profile_, CopyKind::d2d, bytes, true), {{src, bytes}}, {{dst, bytes}});
    notify(std::move(lock), std::move(activity));
  }

  void memset_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) override {
    std::unique_lock lock(mutex_);
    clock_.check_stream("memset_async", stream);
    if (bytes == 0) return;
    memory_.fill("memset_async", dst, value, bytes);
    auto activity = issue(Activity::Kind::memset, "memset", stream,
                          transfer_duration_ns(profile_, CopyKind::memset, bytes, true), {}, {{dst, bytes}});
    notify(std::move(lock), std::move(activity));
  }

  // ---- pinned host memory ----
  void* alloc_pinned(std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    return pinned_.allocate(bytes);
  }
  void free_pinned(void* ptr) override {
    std::lock_guard lock(mutex_);
    pinned_.free(ptr);
  }

  // ---- SimDevice extras ----
  std::uint64_t now_ns() const override {
    std::lock_guard lock(mutex_);
    return clock_.now();
  }
  void advance_ns(std::uint64_t ns) override {
    std::lock_guard lock(mutex_);
    clock_.advance(ns);
  }
  std::uint64_t stream_ready_ns(StreamHandle stream) const override {
    std::lock_guard lock(mutex_);
    return clock_.ready("stream_ready_ns", stream);
  }

  void launch(const SimLaunch& launch, StreamHandle stream) override {
    std::unique_lock lock(mutex_);
    clock_.check_stream("launch", stream);
    const std::string operation = "launch of kernel '" + launch.name + "'";
    for (const SimRange& range : launch.reads) memory_.check_mapped(operation.c_str(), range.ptr, range.bytes);
    for (const SimRange& range : launch.writes) memory_.check_mapped(operation.c_str(), range.ptr, range.bytes);
    // The host pays the launch cost before the kernel can be queued (see sim_timing.hpp).
    clock_.advance(launch_cost_ns(profile_));
    kernels_++;
    auto activity = issue(Activity::Kind::kernel, launch.name, stream, launch.duration_ns, launch.reads, launch.writes);
    notify(std::move(lock), std::move(activity));
  }

  void write(DevicePtr dst, std::span<const std::uint8_t> bytes) override {
    std::lock_guard lock(mutex_);
    memory_.check_mapped("write", dst, bytes.size());
    require_backing("write", dst);
    memory_.copy_in("write", dst, bytes.data(), bytes.size());
  }
  void read(DevicePtr src, std::span<std::uint8_t> out) override {
    std::lock_guard lock(mutex_);
    memory_.check_mapped("read", src, out.size());
    require_backing("read", src);
    memory_.copy_out("read", out.data(), src, out.size());
  }
  bool is_mapped(DevicePtr ptr, std::size_t bytes) const override {
    std::lock_guard lock(mutex_);
    return memory_.is_mapped(ptr, bytes);
  }

  SimCounters counters() const override {
    std::lock_guard lock(mutex_);
    const MemoryCounters& memory = memory_.counters();
    SimCounters out;
    out.maps = memory.maps;
    out.unmaps = memory.unmaps;
    out.physical_creates = memory.physical_creates;
    out.physical_releases = memory.physical_releases;
    out.physical_bytes_in_use = memory.physical_bytes_in_use;
    out.physical_bytes_peak = memory.physical_bytes_peak;
    out.bytes_h2d = bytes_h2d_;
    out.bytes_d2h = bytes_d2h_;
    out.bytes_d2d = bytes_d2d_;
    out.kernels = kernels_;
    return out;
  }

  void set_activity_observer(std::function<void(const Activity&)> observer) override {
    std::lock_guard lock(mutex_);
    observer_ = observer ? std::make_shared<const Observer>(std::move(observer)) : nullptr;
  }

 private:
  // Queues the operation on its stream; returns what to tell the observer, if there is one.
  std::optional<Activity> issue(Activity::Kind kind, const std::string& name, StreamHandle stream,
                                std::uint64_t duration_ns, std::vector<SimRange> reads,
                                std::vector<SimRange> writes) {
    const Interval when = clock_.issue(stream, duration_ns);
    if (!observer_) return std::nullopt;
    return Activity{kind, name, stream, when.start_ns, when.end_ns, std::move(reads), std::move(writes)};
  }

  // The observer runs without the lock held, so that it may call back into the device.
  void notify(std::unique_lock<std::mutex> lock, std::optional<Activity> activity) {
    if (!activity) return;
    const std::shared_ptr<const Observer> observer = observer_;
    lock.unlock();
    (*observer)(*activity);
  }

  static void require_host_pointer(const char* operation, const void* ptr) {
    if (ptr == nullptr) fail(DeviceErrc::invalid_value, "{}: the host pointer is null", operation);
  }

  void require_backing(const char* operation, DevicePtr ptr) const {
    if (!memory_.backed()) {
      fail(DeviceErrc::invalid_value,
           "{}({}): memory is not backed on this sim device (created with back_memory = false), so it holds no bytes",
           operation, hex(ptr));
    }
  }

  mutable std::mutex mutex_;
  const GpuProfile profile_;
  const int ordinal_;
  SimMemory memory_;
  SimClock clock_;
  PinnedHostMemory pinned_;
  std::uint64_t bytes_h2d_ = 0, bytes_d2h_ = 0, bytes_d2d_ = 0, kernels_ = 0;
  std::shared_ptr<const Observer> observer_;
};

}  // namespace

std::shared_ptr<SimDevice> create_sim_device(const SimOptions& options, int ordinal) {
  const GpuProfile& profile = gpu_profile(options.profile);
  const std::size_t capacity = options.capacity_bytes != 0 ? options.capacity_bytes : profile.memory_bytes;
  return std::make_shared<SimDeviceImpl>(profile, capacity, options.back_memory, ordinal);
}

}  // namespace delta::sim
