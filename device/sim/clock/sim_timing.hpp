// How long simulated operations take, from a GPU profile. Kept apart from the device so the
// formulas are written once and stated in one place.
//
// Model (all durations rounded up to whole nanoseconds, so no non-empty operation is free):
//   h2d / d2h copy : kCopyLatencyNs + bytes / link bandwidth, where the link bandwidth is the
//                    profile's pinned figure, times pageable_factor when the host side was not
//                    allocated with alloc_pinned.
//   d2d copy       : kCopyLatencyNs + 2 * bytes / device bandwidth (every byte is read once and
//                    written once, and both share the HBM bandwidth).
//   memset         : kCopyLatencyNs + bytes / device bandwidth (writes only).
//   kernel         : its declared duration; the host clock first advances by the profile's
//                    launch latency, the CPU cost of issuing a launch, so a loop of tiny kernels
//                    is launch-bound as on real hardware. Copies and memsets cost the host
//                    nothing: their fixed cost is device-side and sits in kCopyLatencyNs.
#pragma once

#include <delta/device.hpp>

#include <cstddef>
#include <cstdint>

namespace delta::sim {

// Fixed device-side cost of one copy or memset (DMA setup and completion), in nanoseconds.
inline constexpr std::uint64_t kCopyLatencyNs = 1500;

enum class CopyKind { h2d, d2h, d2d, memset };

std::uint64_t transfer_duration_ns(const GpuProfile& profile, CopyKind kind, std::size_t bytes,
                                   bool host_pinned);

// The host-side cost of one kernel launch, in whole nanoseconds.
std::uint64_t launch_cost_ns(const GpuProfile& profile);

}  // namespace delta::sim
