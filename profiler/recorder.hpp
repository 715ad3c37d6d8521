// The recorder: every block's life and every launch, copy and memset with the blocks it
// uses, split into iterations, turned into a delta trace.
//
// It is fed by the src/ layer (allocations and frees of the process-wide allocator) and by
// an activity source: CUPTI callbacks on a real GPU, the sim device's observer in tests and
// what-if runs. Both feed it from any thread; one mutex guards its state, since launches and
// allocations must be ordered against each other for attribution to be right.
//
// Iterations come from explicit markers (mark_step, i.e. delta_step()) or, when the program
// marks none, from the repeating period of the launch names (iteration_detect.hpp). After the
// configured number of iterations the recorder is finished: later events are ignored and
// blocks still live keep free_ns = kNever.
#pragma once

#include "profiler/block_map.hpp"
#include "profiler/iteration_detect.hpp"

#include <delta/trace.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace delta::profiler {

struct RecorderOptions {
  std::uint32_t iterations = 2;  // finish after this many complete iterations; 0 = never
  DetectionOptions detection;    // min_repeats is raised to iterations + 1 while recording
  std::size_t first_detection_at = 64;  // ops before automatic detection is first tried
};

struct OpInfo {
  std::string name;
  trace::OpKind kind = trace::OpKind::kernel;
  std::uint64_t stream = 0;
  std::optional<std::int64_t> duration_ns;  // known at issue (sim), or later by correlation (CUPTI)
  std::uint64_t bytes = 0;
};

class Recorder {
 public:
  using Clock = std::function<std::int64_t()>;  // nanoseconds, any origin, monotonic
  // The attribution step runs under the recorder's lock with the live blocks of this moment;
  // it fills op.blocks (and may refine op.kind, e.g. a cudaMemcpyDefault copy).
  using Attribution = std::function<void(const BlockMap&, trace::Op&)>;

  Recorder(RecorderOptions options, Clock clock);

  // --- block life (from the src/ layer) ---
  void on_alloc(std::uint64_t address, std::uint64_t size, std::uint64_t stream);
  void on_free(std::uint64_t address);

  // --- ops (from an activity source) ---
  // Records an op issued now; returns its index, or nullopt once finished.
  std::optional<std::size_t> add_op(OpInfo info, const Attribution& attribute);
  // More attribution for an op already recorded (a driver launch nested in a runtime launch
  // can name the kernel when the runtime call could not). Ignored once the op is cut off.
  void amend_op(std::size_t op, const Attribution& attribute);
  // Durations measured later (CUPTI activity records), joined by correlation id.
  void bind_correlation(std::uint32_t correlation, std::size_t op);
  void complete_correlation(std::uint32_t correlation, std::int64_t duration_ns, std::uint64_t bytes = 0);

  // --- markers ---
  void mark_step();                 // end of a training step (an iteration boundary)
  void mark_phase(trace::Phase phase);  // ops issued from now on, until the next step

  // Ends the recording here (a dump asked for before the iterations were complete).
  void finish();
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  std::size_t op_count() const;
  // Step markers counted so far (the iteration a launch issued now belongs to, from 0).
  std::size_t steps_marked() const;
  // The live blocks a packed param buffer points into, in the order of their first pointer
  // (param_blocks), looked up now: what a launch about to run may touch.
  std::vector<LiveBlock> blocks_in_params(std::span<const std::byte> params) const;
  std::size_t block_count() const;

  // --- what ends up in the trace besides blocks and ops ---
  void set_gpu(trace::GpuInfo gpu);
  void set_metadata(const std::string& key, const std::string& value);
  void add_callback_overhead(std::chrono::nanoseconds spent);  // time an activity source spent

  // The trace recorded so far (all of it once finished). Iterations: the marked or detected
  // ones; a trailing incomplete iteration is kept and flagged in metadata.
  trace::Trace snapshot() const;

 private:
  struct OpExtra {
    std::uint32_t name_id = 0;
    std::uint64_t live_bytes = 0;  // before the op was issued
    std::uint32_t thread = 0;
    bool explicit_phase = false;
  };
  struct Boundaries {
    std::vector<std::size_t> starts;  // first op of each iteration
    // With markers: when each iteration began (the marker's time), or -1 where no marker
    // began it (the first); an allocation between the marker and its first op is the step's.
    std::vector<std::int64_t> start_ns;
    std::size_t end = 0;              // one past the last op kept
    bool warmup = false;              // iteration 0 is the warm-up before the detected cycle
    bool last_complete = true;
    std::string method;               // "markers", "automatic", "none"
  };

  // Strictly increasing under the lock, so that events keep their issue order in time even
  // when the clock does not move between them (the sim's host clock stands still across
  // allocations): an op issued before a free is strictly earlier than it.
  std::int64_t now() {
    last_ns_ = std::max(clock_() - origin_, last_ns_ + 1);
    return last_ns_;
  }
  void maybe_detect_locked();
  void finish_locked(std::size_t end_op);
  Boundaries boundaries_locked() const;

  const RecorderOptions options_;
  const Clock clock_;
  const std::int64_t origin_;

  mutable std::mutex mutex_;
  std::atomic<bool> finished_{false};
  BlockMap live_;
  std::vector<trace::Block> blocks_;  // id = index + 1
  std::vector<trace::Op> ops_;
  std::vector<OpExtra> extras_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
  std::unordered_map<std::uint32_t, std::size_t> correlations_;
  std::vector<std::size_t> step_marks_;  // op counts at each effective delta_step()
  std::vector<std::int64_t> step_mark_ns_;  // and when each was made
  std::optional<DetectedIterations> detected_;  // set when automatic detection finished the recording
  std::size_t next_detection_at_;
  trace::Phase phase_ = trace::Phase::unknown;
  std::int64_t end_ns_ = trace::kNever;
  std::int64_t last_ns_ = -1;

  trace::GpuInfo gpu_;
  std::map<std::string, std::string> metadata_;
  std::uint64_t unknown_frees_ = 0, overlaps_ = 0;
  std::atomic<std::uint64_t> callback_ns_{0}, callbacks_{0}, hook_ns_{0}, hooks_{0};
};

}  // namespace delta::profiler
