#include "device/sim/clock/sim_timing.hpp"

#include <cmath>

namespace delta::sim {

namespace {

std::uint64_t ceil_ns(double bytes, double bytes_per_s) {
  return static_cast<std::uint64_t>(std::ceil(bytes * 1e9 / bytes_per_s));
}

}  // namespace

std::uint64_t transfer_duration_ns(const GpuProfile& profile, CopyKind kind, std::size_t bytes,
                                   bool host_pinned) {
  const double host_factor = host_pinned ? 1.0 : profile.pageable_factor;
  const auto n = static_cast<double>(bytes);
  switch (kind) {
    case CopyKind::h2d: return kCopyLatencyNs + ceil_ns(n, profile.h2d_bytes_per_s * host_factor);
    case CopyKind::d2h: return kCopyLatencyNs + ceil_ns(n, profile.d2h_bytes_per_s * host_factor);
    case CopyKind::d2d: return kCopyLatencyNs + ceil_ns(2.0 * n, profile.d2d_bytes_per_s);
    case CopyKind::memset: return kCopyLatencyNs + ceil_ns(n, profile.d2d_bytes_per_s);
  }
  return kCopyLatencyNs;
}

std::uint64_t launch_cost_ns(const GpuProfile& profile) { return profile.launch_cost_ns(); }

}  // namespace delta::sim
