// The simulated GPU: what the tests, the no-GPU demo and the planner's simulator run on.
//
// Memory: physical handles are host pages (lazily backed, so a 141 GB H200 costs nothing
// until bytes are written); virtual addresses are fake device addresses in their own range
// that never alias host memory, so only the device API can touch them and every access is
// checked against the mapping table.
// Time: a virtual clock in nanoseconds. Each stream is an ordered queue: an operation starts
// when the stream is free and the host has reached its issue time, and lasts what the GPU
// profile says (copies by bandwidth, kernels by their declared duration). Events complete
// when the virtual clock passes the time their stream reached when they were recorded.
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace delta {

// Counters the sim keeps for tests and reports.
struct SimCounters {
  std::uint64_t maps = 0, unmaps = 0, physical_creates = 0, physical_releases = 0;
  std::uint64_t bytes_h2d = 0, bytes_d2h = 0, bytes_d2d = 0;
  std::uint64_t kernels = 0;
  std::size_t physical_bytes_in_use = 0, physical_bytes_peak = 0;
};

// A simulated kernel launch: the device ranges it reads and writes. Each range must be
// entirely mapped when the kernel runs, or the launch fails with DeviceErrc::not_mapped.
struct SimRange {
  DevicePtr ptr = 0;
  std::size_t bytes = 0;
};
struct SimLaunch {
  std::string name;
  std::uint64_t duration_ns = 0;
  std::vector<SimRange> reads;
  std::vector<SimRange> writes;
};

class SimDevice : public Device {
 public:
  // --- virtual clock ---
  virtual std::uint64_t now_ns() const = 0;
  virtual void advance_ns(std::uint64_t ns) = 0;  // host time passes (e.g. CPU work)
  // Time at which all work queued on `stream` so far completes.
  virtual std::uint64_t stream_ready_ns(StreamHandle stream) const = 0;

  // --- simulated work ---
  virtual void launch(const SimLaunch& launch, StreamHandle stream) = 0;

  // --- checked host access to device bytes (tests fill and verify patterns with these) ---
  // Synchronous; every byte must be mapped. Throws DeviceError(not_mapped) naming the address.
  virtual void write(DevicePtr dst, std::span<const std::uint8_t> bytes) = 0;
  virtual void read(DevicePtr src, std::span<std::uint8_t> out) = 0;
  virtual bool is_mapped(DevicePtr ptr, std::size_t bytes) const = 0;

  virtual SimCounters counters() const = 0;
  virtual const GpuProfile& profile() const = 0;

  // Observer called for every launch, copy and memset as it is issued (the recorder's hook on
  // the sim, standing in for CUPTI's callbacks). Pass an empty function to remove it.
  struct Activity {
    enum class Kind { kernel, h2d, d2h, d2d, memset } kind;
    std::string name;
    StreamHandle stream;
    std::uint64_t start_ns, end_ns;
    std::vector<SimRange> reads, writes;
  };
  virtual void set_activity_observer(std::function<void(const Activity&)> observer) = 0;
};

// Convenience: the sim device behind a Device pointer, or nullptr.
inline SimDevice* as_sim(Device* device) { return dynamic_cast<SimDevice*>(device); }

}  // namespace delta
