// A kernel launch as the executor sees it at the entry point where it is issued (an interposed
// driver call, or the sim device's launch hook): its name, its stream, the device ranges its
// parameters point to, and a way to issue it again with other pointers (a copy of its
// parameters), which is what a regeneration replays.
#pragma once

#include <delta/device.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace delta::executor {

struct LaunchRange {
  DevicePtr ptr = 0;
  std::size_t bytes = 0;
  bool read = true;
  bool write = true;  // unknown directions count as both
};

// Issues the same kernel again, with `ptrs[i]` in place of ranges[i].ptr, on `stream`. Called
// only from the executor's legal contexts (an entry point), never from a CUPTI callback.
using Relaunch = std::function<void(std::span<const DevicePtr> ptrs, StreamHandle stream)>;

// What a launch is: a kernel is matched against the plan's op by name; a copy or a memset (the
// GPU route sees them as driver calls whose names need not be the ones the trace recorded from
// the runtime) by kind.
enum class LaunchKind : std::uint8_t { kernel, copy, memset };

struct Launch {
  std::string_view name;
  StreamHandle stream = 0;
  std::span<const LaunchRange> ranges;
  // Called at most once, only when a plan may replay this launch; empty when the route cannot
  // copy the launch's parameters (the executor then swaps instead of regenerating).
  std::function<Relaunch()> capture;
  // The module its function belongs to (a CUmodule or CUlibrary), 0 when the route cannot
  // tell: a captured launch can be replayed only while its module is loaded.
  std::uintptr_t module = 0;
  LaunchKind kind = LaunchKind::kernel;  // last: aggregate initialisers name the fields above in order
};

}  // namespace delta::executor
