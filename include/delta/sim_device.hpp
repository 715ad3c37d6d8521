// The simulated GPU: what the tests, the no-GPU demo and the planner's simulator run on.
// docs/sim-device.md tells what each part is for.
//
// Memory: physical handles hold bytes (lazily backed host pages, so a 141 GB H200 costs nothing
// until bytes are written), symbolic runs (SimContent::digest) or nothing (SimContent::none).
// Virtual addresses are fake device addresses in their own range that never alias host memory,
// so only the device API can touch them and every access is checked against the mapping table.
// Time: a virtual clock in nanoseconds. Each stream is an ordered queue: an operation starts
// when the stream is free and the host has reached its issue time, and lasts what the GPU
// profile says (copies by bandwidth, kernels by their declared duration). Events complete
// when the virtual clock passes the time their stream reached when they were recorded.
// Hazards: because the sim moves bytes when an operation is issued, it also checks that the
// order it issued them in is one a real GPU guarantees: accesses from different streams that
// overlap in address and in virtual time, an unmap or host access under work still in flight,
// all fail with DeviceErrc::hazard (always on, in every content mode).
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace delta {

// Counters the sim keeps for tests and reports.
struct SimCounters {
  std::uint64_t maps = 0, unmaps = 0, physical_creates = 0, physical_releases = 0;
  std::uint64_t bytes_h2d = 0, bytes_d2h = 0, bytes_d2d = 0;
  std::uint64_t kernels = 0;
  std::size_t physical_bytes_in_use = 0, physical_bytes_peak = 0;
  // Launches that touched unmapped bytes and ran anyway (SimUnmapped::count).
  std::uint64_t unmapped_accesses = 0;
  // What the sim's own bookkeeping costs: runs held by symbolic content (SimContent::digest,
  // device and pinned memory together) and address ranges the hazard checker tracks.
  std::size_t content_runs = 0, hazard_ranges = 0;
};

// A simulated kernel launch: the device ranges it reads and writes. Each range must be
// entirely mapped when the kernel runs, or the launch fails with DeviceErrc::not_mapped
// (SimUnmapped::count runs it anyway, see there).
struct SimRange {
  DevicePtr ptr = 0;
  std::size_t bytes = 0;
};
struct SimLaunch {
  std::string name;
  std::uint64_t duration_ns = 0;
  std::vector<SimRange> reads;
  std::vector<SimRange> writes;
  // 0: the kernel has no effect on the data. Otherwise it is a deterministic function of its
  // inputs: write range k receives generated content with seed
  // sim_write_seed(seed, k, digests of every read range in order), byte i of it being
  // sim_generated_byte(that seed, i). Reads are taken before any write of the launch, so a
  // range in both lists is read-modify-write. Nothing is written in SimContent::none.
  std::uint64_t seed = 0;
  // Non-empty: an opaque launch, seen as a GPU profiler sees one. The activity observer gets
  // the name and these parameter bytes only (Activity::params; its reads and writes are empty),
  // so a recorder must learn the directions itself; the ranges above are the kernel's ground
  // truth, reported apart (Activity::truth_*) for tests to compare against. Build them with
  // sim_pack_params. The ranges still say what the kernel does.
  std::vector<std::uint8_t> params;
  // A non-deterministic kernel (atomics): every launch writes different content, even from
  // equal inputs, so replaying it does not reproduce what it wrote. Needs a seed.
  bool nondeterministic = false;
};

// Parameter bytes of an opaque launch: each pointer as a little-endian 64-bit word, in order,
// then one scalar word (`scalar`, e.g. an element count, as real kernels pass them).
std::vector<std::uint8_t> sim_pack_params(std::span<const DevicePtr> pointers, std::uint64_t scalar);
// The same launch with its pointers moved: every range that starts at `moves[i].first` starts
// at `moves[i].second`, and every parameter word equal to `first` becomes `second` (a replay
// with its parameters patched, as a memory manager replays a kernel on other memory).
SimLaunch sim_repoint(const SimLaunch& launch, std::span<const std::pair<DevicePtr, DevicePtr>> moves);

// The byte function of generated content: byte i of a run generated with `seed`.
std::uint8_t sim_generated_byte(std::uint64_t seed, std::uint64_t index);
// The seed of write range `write_index` of a launch with `launch_seed` (non-zero) whose read
// ranges have `read_digests`, in order.
std::uint64_t sim_write_seed(std::uint64_t launch_seed, std::size_t write_index,
                             std::span<const std::uint64_t> read_digests);
// Unmapped bytes read by a launch under SimUnmapped::count read as generated content with this
// seed, indexed by device address: the byte at address a is sim_generated_byte(kSimPoisonSeed, a).
inline constexpr std::uint64_t kSimPoisonSeed = 0xDEAD'0BAD'F00D'5EEDULL;

// Device failures the sim can be told to produce, for tests of the code that must survive them
// (the executor degrades and reports; it never loses data). Launch failures of a kernel whose
// module was unloaded are the caller's to model: the sim has no modules.
enum class SimFault : std::uint8_t {
  copy_h2d,         // copy_h2d_async fails before anything is queued
  copy_d2h,         // copy_d2h_async fails before anything is queued
  alloc_pinned,     // alloc_pinned finds no host memory
  create_physical,  // create_physical finds no device memory
};
inline constexpr std::size_t kSimFaultKinds = 4;

class SimDevice : public Device {
 public:
  // --- fault injection ---
  // After `skip` more successful calls of that kind, the next `count` calls fail with
  // DeviceError (driver_error for copies, out_of_memory for memory), their message saying
  // the failure was injected. A call made again replaces what is left of the previous one.
  virtual void inject_fault(SimFault fault, std::uint64_t count, std::uint64_t skip = 0) = 0;

  // --- virtual clock ---
  virtual std::uint64_t now_ns() const = 0;
  virtual void advance_ns(std::uint64_t ns) = 0;  // host time passes (e.g. CPU work)
  // Time at which all work queued on `stream` so far completes.
  virtual std::uint64_t stream_ready_ns(StreamHandle stream) const = 0;

  // --- simulated work ---
  virtual void launch(const SimLaunch& launch, StreamHandle stream) = 0;

  // Interposition: `hook` runs at the start of every launch(), before any check and without
  // the device's lock, so it may call any device function. It stands in for a library
  // preloaded in front of cuLaunchKernel (a memory manager making the kernel's blocks resident
  // before it runs). Launches the hook issues from its own thread go straight to the device
  // without re-entering it. Pass an empty function to remove it.
  using LaunchHook = std::function<void(const SimLaunch&, StreamHandle)>;
  virtual void set_launch_hook(LaunchHook hook) = 0;

  // A memset in every way (ordered on `stream`, checked for hazards, seen by the observer) but
  // for its time: 1 ns on the device, nothing on the host. For tools that run a trace as a
  // program and must define a block's bytes that the trace reads before it writes them (a
  // recorded trace's uses are all touches): in the real job the op's own kernel writes them,
  // and the trace's duration of that op already holds the cost.
  virtual void initialise_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) = 0;

  // --- checked host access to device bytes (tests fill and verify patterns with these) ---
  // Synchronous; every byte must be mapped. Throws DeviceError(not_mapped) naming the address,
  // DeviceError(hazard) when a device operation still in flight writes the range (or, for
  // write(), accesses it), DeviceError(invalid_value) under SimContent::none.
  virtual void write(DevicePtr dst, std::span<const std::uint8_t> bytes) = 0;
  virtual void read(DevicePtr src, std::span<std::uint8_t> out) = 0;
  // A 64-bit hash of the content of [ptr, ptr + bytes): equal for equal content wherever it
  // lives. Under SimContent::bytes it hashes the bytes; under SimContent::digest it hashes the
  // runs, joined where they continue each other, so how they happen to be split does not
  // matter (but content generated on the device and the same bytes written from the host hash
  // differently there). Checked like read().
  virtual std::uint64_t digest(DevicePtr ptr, std::size_t bytes) = 0;
  // The digests of `ranges`, as a small kernel of DELTA's own on `stream` would compute them:
  // ordered after the stream's earlier work and checked for hazards as a read on that stream
  // (no host synchronisation, unlike digest()). It takes device time (one read of the bytes
  // at device bandwidth) and the host cost of a launch; the observer does not see it (it is
  // not the program's). Same values as digest(). Throws like digest() under SimContent::none.
  virtual std::vector<std::uint64_t> fingerprint(std::span<const SimRange> ranges, StreamHandle stream) = 0;
  virtual bool is_mapped(DevicePtr ptr, std::size_t bytes) const = 0;

  virtual SimCounters counters() const = 0;
  virtual const GpuProfile& profile() const = 0;
  virtual SimContent content() const = 0;
  // Checks the sim's own structures (symbolic runs sorted, non-overlapping, covering and
  // joined; hazard ranges sorted and disjoint); throws std::logic_error naming the first
  // broken rule. For tests.
  virtual void check_invariants() const = 0;

  // Observer called for every launch, copy and memset as it is issued (the recorder's hook on
  // the sim, standing in for CUPTI's callbacks). Pass an empty function to remove it.
  struct Activity {
    enum class Kind { kernel, h2d, d2h, d2d, memset } kind;
    std::string name;
    StreamHandle stream;
    std::uint64_t start_ns, end_ns;
    std::vector<SimRange> reads, writes;
    // A deterministic kernel's (SimLaunch::seed) digests of its read ranges, in order, as it
    // read them; empty otherwise. What a run's data checks compare without a host read.
    std::vector<std::uint64_t> read_digests;
    // An opaque launch (SimLaunch::params): its parameter bytes, and what it really reads and
    // writes, for tests only: a recorder of opaque launches must not look at truth_*.
    std::vector<std::uint8_t> params;
    std::vector<SimRange> truth_reads, truth_writes;
    bool opaque() const { return !params.empty(); }
  };
  virtual void set_activity_observer(std::function<void(const Activity&)> observer) = 0;
};

// Convenience: the sim device behind a Device pointer, or nullptr.
inline SimDevice* as_sim(Device* device) { return dynamic_cast<SimDevice*>(device); }

}  // namespace delta
