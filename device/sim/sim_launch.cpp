// The simulated GPU (see sim_device_core.hpp): kernel launches, deterministic kernels, launches
// on unmapped memory, and the launch hook.
#include "sim_device_core.hpp"

#include "sim_errors.hpp"
#include "sim_timing.hpp"

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
    for (std::size_t k = 0; k < launch.writes.size(); ++k) {
      const SimRange& range = launch.writes[k];
      memory_.generate(what.c_str(), range.ptr, range.bytes, sim_write_seed(launch.seed, k, digests), true);
    }
  }
  if (touches_unmapped) unmapped_accesses_++;
  kernels_++;
  std::optional<Activity> activity = issue(pending, Activity::Kind::kernel, launch.name, stream, launch.reads, launch.writes);
  if (activity) activity->read_digests = std::move(digests);
  notify(std::move(lock), std::move(activity));
}

}  // namespace delta::sim
