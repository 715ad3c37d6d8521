// The simulated GPU (see sim_device_core.hpp): kernel launches, deterministic kernels, launches
// on unmapped memory, and the launch hook.
#include "device/sim/sim_device_core.hpp"

#include "device/sim/sim_errors.hpp"
#include "device/sim/memory/sim_hash.hpp"
#include "device/sim/clock/sim_timing.hpp"

#include <algorithm>
#include <utility>

namespace delta::sim {

namespace {

// The devices whose launch hook is running on this thread: a launch the hook issues itself
// (a manager replaying kernels) must reach the device without re-entering the hook.
thread_local std::vector<const SimDevice*> t_hooks_running;

class HookScope {
 public:
  explicit HookScope(const SimDevice* device) { t_hooks_running.push_back(device); }
  ~HookScope() { t_hooks_running.pop_back(); }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
};

bool hook_running(const SimDevice* device) {
  return std::find(t_hooks_running.begin(), t_hooks_running.end(), device) != t_hooks_running.end();
}

}  // namespace

void SimDeviceImpl::set_launch_hook(LaunchHook hook) {
  std::lock_guard lock(mutex_);
  hook_ = hook ? std::make_shared<const LaunchHook>(std::move(hook)) : nullptr;
}

void SimDeviceImpl::launch(const SimLaunch& launch, StreamHandle stream) {
  if (!hook_running(this)) {
    std::shared_ptr<const LaunchHook> hook;
    {
      std::lock_guard lock(mutex_);
      hook = hook_;
    }
    // Without the lock: the hook calls back into the device (maps memory, copies, launches).
    if (hook) {
      HookScope scope(this);
      (*hook)(launch, stream);
    }
  }
  launch_unhooked(launch, stream);
}

void SimDeviceImpl::launch_unhooked(const SimLaunch& launch, StreamHandle stream) {
  std::unique_lock lock(mutex_);
  clock_.check_stream("launch", stream);
  const std::string what = "launch of kernel '" + launch.name + "'";
  // Every range is checked before anything changes, so a refused launch leaves no trace.
  bool touches_unmapped = false;
  std::vector<Access> accesses;
  for (const bool write : {false, true}) {
    for (const SimRange& range : write ? launch.writes : launch.reads) {
      SimMemory::check_range(what.c_str(), range.ptr, range.bytes);
      if (!memory_.is_mapped(range.ptr, range.bytes)) {
        if (on_unmapped_ == SimUnmapped::fail) memory_.check_mapped(what.c_str(), range.ptr, range.bytes);
        touches_unmapped = true;
      }
      accesses.push_back({range.ptr, range.bytes, write});
    }
  }
  // The host pays the launch cost before the kernel can be queued (see sim_timing.hpp).
  const Pending pending = prepare(what, stream, launch_cost_ns(profile_), launch.duration_ns, std::move(accesses));

  std::vector<std::uint64_t> digests;
  if (launch.seed != 0 && memory_.backed()) {
    // Every read before any write, so a range in both is read-modify-write.
    digests.reserve(launch.reads.size());
    for (const SimRange& range : launch.reads) digests.push_back(memory_.hash(what.c_str(), range.ptr, range.bytes, true));
    // A non-deterministic kernel's writes depend on when it runs (the order its atomics
    // happened to take), modelled by the launch's sequence number.
    const std::uint64_t seed = launch.nondeterministic ? mix64(launch.seed ^ mix64(kernels_ + 1)) : launch.seed;
    for (std::size_t k = 0; k < launch.writes.size(); ++k) {
      const SimRange& range = launch.writes[k];
      memory_.generate(what.c_str(), range.ptr, range.bytes, sim_write_seed(seed, k, digests), true);
    }
  }
  if (touches_unmapped) unmapped_accesses_++;
  kernels_++;
  std::optional<Activity> activity;
  if (launch.params.empty()) {
    activity = issue(pending, Activity::Kind::kernel, launch.name, stream, launch.reads, launch.writes);
    if (activity) activity->read_digests = std::move(digests);
  } else {
    // Opaque: the observer sees what a GPU profiler sees, the parameter bytes; the ranges go
    // apart, as ground truth for tests.
    activity = issue(pending, Activity::Kind::kernel, launch.name, stream, {}, {});
    if (activity) {
      activity->params = launch.params;
      activity->truth_reads = launch.reads;
      activity->truth_writes = launch.writes;
    }
  }
  notify(std::move(lock), std::move(activity));
}

std::vector<std::uint64_t> SimDeviceImpl::fingerprint(std::span<const SimRange> ranges, StreamHandle stream) {
  std::lock_guard lock(mutex_);
  clock_.check_stream("fingerprint", stream);
  std::vector<Access> accesses;
  std::size_t bytes = 0;
  for (const SimRange& range : ranges) {
    memory_.check_mapped("fingerprint", range.ptr, range.bytes);
    require_backing("fingerprint", range.ptr);
    accesses.push_back({range.ptr, range.bytes, false});
    bytes += range.bytes;
  }
  // A kernel that reads every byte once: the device time of a copy's read side.
  const std::uint64_t duration = transfer_duration_ns(profile_, CopyKind::d2d, bytes, true) / 2;
  const Pending pending = prepare("fingerprint", stream, launch_cost_ns(profile_), duration, std::move(accesses));
  std::vector<std::uint64_t> out;
  out.reserve(ranges.size());
  for (const SimRange& range : ranges) out.push_back(memory_.hash("fingerprint", range.ptr, range.bytes, false));
  // Issued like any operation (clock, hazards), but not the program's: no observer.
  clock_.advance(pending.host_delay_ns);
  clock_.issue(stream, pending.duration_ns);
  hazards_.record(pending.record, pending.accesses, clock_.now());
  return out;
}

}  // namespace delta::sim
