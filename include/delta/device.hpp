// The narrow device interface: the subset of the CUDA driver API that DELTA uses.
//
// Two implementations exist: `cuda` (libcuda.so.1 opened with dlopen on first use) and `sim`
// (a simulated GPU in host memory with a virtual clock). Everything above this header is
// written once against it, so the allocator, the recorder and the simulator run unchanged on
// either.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace delta {

using DevicePtr = std::uintptr_t;     // a device virtual address
using StreamHandle = std::uintptr_t;  // CUstream / cudaStream_t value; 0 is the legacy default stream
using EventHandle = std::uintptr_t;   // CUevent value
using PhysHandle = std::uint64_t;     // CUmemGenericAllocationHandle; 0 is never valid

// cudaStreamLegacy and cudaStreamPerThread as the runtime spells them.
inline constexpr StreamHandle kLegacyStream = 0x1;
inline constexpr StreamHandle kPerThreadStream = 0x2;

enum class DeviceErrc {
  out_of_memory,    // physical memory exhausted
  invalid_value,    // bad size, alignment or argument
  not_mapped,       // access to or unmap of an address range that is not mapped
  already_mapped,   // map over a range that is already mapped
  invalid_handle,   // unknown or already released stream, event, handle or reservation
  no_driver,        // libcuda.so.1 could not be loaded or lacks an entry point
  no_device,        // driver present but no usable device
  driver_error,     // any other driver failure (message carries the CUresult name)
  hazard,           // sim only: work ordered so that a real GPU would fault or corrupt data (a copy
                    // racing a kernel on another stream, an unmap under a kernel in flight, a host
                    // read of bytes a device operation is still writing); the message names both
                    // operations, their streams, the address range and the virtual times
};

// Every device failure is reported with this exception. The message names the operation,
// the arguments that matter and, on the cuda path, the driver's own error string.
class DeviceError : public std::runtime_error {
 public:
  DeviceError(DeviceErrc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  DeviceErrc code() const noexcept { return code_; }

 private:
  DeviceErrc code_;
};

struct MemInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

// Timing figures of a GPU model, used by the sim device and by the planner's simulator.
struct GpuProfile {
  std::string name;                  // "h200", "a100", "v100", "titanv"
  std::size_t memory_bytes = 0;      // device memory capacity
  double h2d_bytes_per_s = 0;        // pinned host -> device, one direction
  double d2h_bytes_per_s = 0;        // pinned device -> host, one direction
  double pageable_factor = 0.5;      // pageable host memory runs at this fraction of pinned
  double d2d_bytes_per_s = 0;        // device memory bandwidth (memset, device copies)
  double launch_latency_ns = 0;      // host-side cost of one kernel launch
  double fp32_flops = 0;             // dense fp32 throughput, for cost estimates
  double fp16_flops = 0;             // dense tensor-core fp16/bf16 throughput
  int copy_engines = 2;              // independent copy engines (one per direction when 2)

  // The host's cost of issuing one kernel in whole nanoseconds: what the sim device advances
  // its host clock by at each launch, and what the planner's simulator paces ops by (one
  // figure, so that the plan's prediction and the run agree on it).
  std::uint64_t launch_cost_ns() const { return static_cast<std::uint64_t>(std::ceil(launch_latency_ns)); }
};

// Known profiles by name (case-insensitive): h200, a100, v100, titanv. Throws
// std::invalid_argument naming the known profiles on an unknown name.
const GpuProfile& gpu_profile(std::string_view name);

// The profile of a device by its name as the driver reports it ("NVIDIA H200", "Tesla
// V100-SXM2-32GB", "NVIDIA TITAN V"), or "" when none matches.
std::string gpu_profile_for_device(std::string_view device_name);

class Device {
 public:
  virtual ~Device() = default;

  virtual std::string_view kind() const noexcept = 0;  // "cuda" or "sim"
  virtual int ordinal() const noexcept = 0;
  virtual MemInfo mem_info() = 0;
  // Physical allocation granularity for VMM (2 MiB on every current GPU and on the sim).
  virtual std::size_t granularity() = 0;

  // --- virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap ...) ---
  // Reserve `size` bytes of virtual address space (multiple of granularity). Never backs it.
  virtual DevicePtr reserve(std::size_t size) = 0;
  virtual void release_reservation(DevicePtr va, std::size_t size) = 0;
  // Create `size` bytes of physical memory (multiple of granularity). Throws DeviceError
  // with DeviceErrc::out_of_memory when the device has no room.
  virtual PhysHandle create_physical(std::size_t size) = 0;
  virtual void release_physical(PhysHandle handle) = 0;
  // Map a whole physical handle at `va` (inside a reservation) and grant read/write access.
  virtual void map(DevicePtr va, std::size_t size, PhysHandle handle) = 0;
  // Unmap exactly one earlier mapping: [va, va + size) must be what one map() call mapped.
  virtual void unmap(DevicePtr va, std::size_t size) = 0;

  // --- streams and events ---
  virtual StreamHandle create_stream() = 0;
  virtual void destroy_stream(StreamHandle stream) = 0;
  virtual void synchronize_stream(StreamHandle stream) = 0;
  // Waits for the work queued on every stream of the device, also streams that were destroyed
  // since (their handles must not be used again, their work still runs).
  virtual void synchronize() = 0;
  virtual EventHandle create_event() = 0;  // timing disabled: cheap to record and query
  virtual void destroy_event(EventHandle event) = 0;
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  virtual bool query_event(EventHandle event) = 0;  // true once all work before it finished
  virtual void synchronize_event(EventHandle event) = 0;
  virtual void stream_wait_event(StreamHandle stream, EventHandle event) = 0;

  // --- copies and memsets, ordered on `stream` ---
  virtual void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, StreamHandle stream) = 0;
  virtual void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, StreamHandle stream) = 0;
  virtual void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, StreamHandle stream) = 0;
  virtual void memset_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) = 0;

  // --- pinned (page-locked) host memory ---
  virtual void* alloc_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* ptr) = 0;
};

enum class DeviceKind { automatic, cuda, sim };

// Parses "auto", "cuda" or "sim"; throws std::invalid_argument naming DELTA_DEVICE otherwise.
DeviceKind parse_device_kind(std::string_view text);

// What the simulated device stores for its memory (see docs/sim-device.md).
enum class SimContent {
  bytes,   // every byte, in lazily backed host pages: exact, costs host RAM for what is written
  digest,  // symbolic runs (generated, filled or literal): cost grows with the number of runs,
           // not the bytes, so a full 141 GB H200 costs megabytes; pinned host memory is
           // symbolic too, and reserved without access so a host dereference of it faults
  none,    // nothing: accounting, checks and timing only (trace replays)
};

// What a simulated kernel launch does when a range it reads or writes is not mapped.
enum class SimUnmapped {
  fail,   // refuse the launch with DeviceErrc::not_mapped, as a real GPU faults
  count,  // run it: count it, read poison from the unmapped bytes, drop writes to them
};

// Options of the simulated device (all have sane defaults: an H200 holding real bytes).
struct SimOptions {
  std::string profile = "h200";
  std::size_t capacity_bytes = 0;  // 0: the profile's memory size
  SimContent content = SimContent::bytes;
  // The older spelling of `content`, kept for its callers: false means SimContent::none
  // whatever `content` says; true leaves `content` in charge.
  bool back_memory = true;
  SimUnmapped on_unmapped = SimUnmapped::fail;
};

// The cuda device for `ordinal`. Throws DeviceError(no_driver / no_device) with a clear message.
std::shared_ptr<Device> make_cuda_device(int ordinal = 0);
std::shared_ptr<Device> make_sim_device(const SimOptions& options = {});

// DELTA_DEVICE=auto|cuda|sim chooses (auto: cuda when a driver and a device exist, else sim);
// DELTA_SIM_PROFILE, DELTA_SIM_CAPACITY, DELTA_SIM_CONTENT (bytes|digest|none) and
// DELTA_SIM_BACKING (1|0, the older switch: 0 is DELTA_SIM_CONTENT=none) configure the sim.
// Throws std::invalid_argument naming the variable on malformed or contradictory settings.
std::shared_ptr<Device> make_device_from_env(int ordinal = 0);

}  // namespace delta
