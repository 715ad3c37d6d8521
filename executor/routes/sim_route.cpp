#include "executor/routes/sim_route.hpp"

#include <memory>

namespace delta::executor {
namespace {
// Set while the executor replays a launch on this thread: the sim's hook leaves that launch
// alone, whether the replay runs inside the hook or from another entry point.
thread_local bool replaying = false;
}  // namespace

SimLaunchView::SimLaunchView(const SimLaunch& launch, StreamHandle stream_, SimDevice& device_)
    : source(launch), stream(stream_), device(device_) {
  for (std::size_t i = 0; i < launch.reads.size(); ++i) {
    ranges.push_back({launch.reads[i].ptr, launch.reads[i].bytes, true, false});
    positions.emplace_back(static_cast<int>(i), -1);
  }
  for (std::size_t i = 0; i < launch.writes.size(); ++i) {
    const SimRange& w = launch.writes[i];
    bool merged = false;
    for (std::size_t r = 0; r < ranges.size() && !merged; ++r) {
      if (ranges[r].ptr == w.ptr && ranges[r].bytes == w.bytes && positions[r].second < 0) {
        ranges[r].write = true;
        positions[r].second = static_cast<int>(i);
        merged = true;
      }
    }
    if (!merged) {
      ranges.push_back({w.ptr, w.bytes, false, true});
      positions.emplace_back(-1, static_cast<int>(i));
    }
  }
}

Launch SimLaunchView::launch() const {
  Launch out;
  out.name = source.name;
  out.stream = stream;
  out.ranges = ranges;
  out.capture = [this]() -> Relaunch {
    // A copy of the launch, as cuLaunchKernel copies its parameter bytes.
    auto copy = std::make_shared<SimLaunch>(source);
    auto where = std::make_shared<std::vector<std::pair<int, int>>>(positions);
    SimDevice* sim = &device;
    return [copy, where, sim](std::span<const DevicePtr> ptrs, StreamHandle on) {
      SimLaunch again = *copy;
      for (std::size_t i = 0; i < ptrs.size() && i < where->size(); ++i) {
        if ((*where)[i].first >= 0) again.reads[(*where)[i].first].ptr = ptrs[i];
        if ((*where)[i].second >= 0) again.writes[(*where)[i].second].ptr = ptrs[i];
      }
      replaying = true;
      try {
        sim->launch(again, on);
      } catch (...) {
        replaying = false;
        throw;
      }
      replaying = false;
    };
  };
  return out;
}

SimLaunchRoute::SimLaunchRoute(SimDevice& device, EntryPoints& entry) : device_(device) {
  device_.set_launch_hook([&entry, &device](const SimLaunch& launch, StreamHandle stream) {
    if (replaying) return;
    SimLaunchView view(launch, stream, device);
    entry.before_launch(view.launch());
  });
}

SimLaunchRoute::~SimLaunchRoute() { device_.set_launch_hook({}); }

}  // namespace delta::executor
