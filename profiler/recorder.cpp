#include "profiler/recorder.hpp"
#include "profiler/directions/param_scan.hpp"
#include "logging/log.hpp"

#include <algorithm>

namespace delta::profiler {
namespace {

// Small per-thread numbers: phases are told apart by which thread issued an op (PyTorch runs
// backward on its autograd device thread).
std::uint32_t this_thread_number() {
  static std::atomic<std::uint32_t> next{1};
  thread_local const std::uint32_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

class ScopedTimer {
 public:
  ScopedTimer(std::atomic<std::uint64_t>& total, std::atomic<std::uint64_t>& count)
      : total_(total), count_(count), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    const auto spent = std::chrono::steady_clock::now() - start_;
    total_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(spent).count(), std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t>& total_;
  std::atomic<std::uint64_t>& count_;
  std::chrono::steady_clock::time_point start_;
};

// Phase of each op of one iteration that has no explicit phase. An iteration whose ops all
// come from one thread gives no hint: they stay unknown. Otherwise the thread that issued the
// iteration's first op is the main thread; ops from other threads are backward, main-thread
// ops before the first of them forward, after the last of them optimizer.
void infer_phases(std::vector<trace::Op>& ops, const std::vector<std::uint32_t>& threads,
                  const std::vector<bool>& explicit_phase, std::size_t begin, std::size_t end) {
  if (begin >= end) return;
  const std::uint32_t main_thread = threads[begin];
  std::size_t first_other = end, last_other = end;
  for (std::size_t i = begin; i < end; ++i) {
    if (threads[i] == main_thread) continue;
    if (first_other == end) first_other = i;
    last_other = i;
  }
  if (first_other == end) return;
  for (std::size_t i = begin; i < end; ++i) {
    if (explicit_phase[i]) continue;
    if (threads[i] != main_thread) ops[i].phase = trace::Phase::backward;
    else if (i < first_other) ops[i].phase = trace::Phase::forward;
    else if (i > last_other) ops[i].phase = trace::Phase::optimizer;
    else ops[i].phase = trace::Phase::backward;
  }
}

}  // namespace

Recorder::Recorder(RecorderOptions options, Clock clock)
    : options_(std::move(options)),
      clock_(std::move(clock)),
      origin_(clock_()),
      next_detection_at_(options_.first_detection_at) {}

void Recorder::on_alloc(std::uint64_t address, std::uint64_t size, std::uint64_t stream) {
  if (finished() || size == 0) return;
  ScopedTimer timer(hook_ns_, hooks_);
  std::lock_guard lock(mutex_);
  if (finished()) return;
  const std::int64_t t = now();
  // An overlap means frees were missed (memory freed behind the allocator's back, or a
  // block the recorder never saw go away): those blocks end here.
  for (const LiveBlock& stale : live_.overlapping(address, size)) {
    live_.erase(stale.address);
    blocks_[stale.id - 1].free_ns = t;
    ++overlaps_;
  }
  trace::Block block;
  block.id = blocks_.size() + 1;
  block.size = size;
  block.address = address;
  block.stream = stream;
  block.alloc_ns = t;
  live_.insert(address, size, block.id);
  blocks_.push_back(std::move(block));
}

void Recorder::on_free(std::uint64_t address) {
  if (finished()) return;
  ScopedTimer timer(hook_ns_, hooks_);
  std::lock_guard lock(mutex_);
  if (finished()) return;
  if (auto block = live_.erase(address)) {
    blocks_[block->id - 1].free_ns = now();
  } else {
    ++unknown_frees_;  // allocated before recording started
  }
}

std::optional<std::size_t> Recorder::add_op(OpInfo info, const Attribution& attribute) {
  if (finished()) return std::nullopt;
  std::lock_guard lock(mutex_);
  if (finished()) return std::nullopt;
  trace::Op op;
  op.id = ops_.size();
  op.name = std::move(info.name);
  op.kind = info.kind;
  op.stream = info.stream;
  op.start_ns = now();
  op.duration_ns = info.duration_ns.value_or(0);
  op.bytes = info.bytes;
  op.phase = phase_;
  if (attribute) attribute(live_, op);

  OpExtra extra;
  auto [it, inserted] = name_ids_.try_emplace(op.name, static_cast<std::uint32_t>(name_ids_.size()));
  extra.name_id = it->second;
  extra.live_bytes = live_.live_bytes();
  extra.thread = this_thread_number();
  extra.explicit_phase = phase_ != trace::Phase::unknown;
  ops_.push_back(std::move(op));
  extras_.push_back(extra);
  const std::size_t index = ops_.size() - 1;
  maybe_detect_locked();
  if (index >= ops_.size()) return std::nullopt;  // detection ended the recording before this op
  return index;
}

void Recorder::amend_op(std::size_t op, const Attribution& attribute) {
  std::lock_guard lock(mutex_);
  if (op < ops_.size() && attribute) attribute(live_, ops_[op]);
}

void Recorder::bind_correlation(std::uint32_t correlation, std::size_t op) {
  std::lock_guard lock(mutex_);
  if (op < ops_.size()) correlations_[correlation] = op;
}

void Recorder::complete_correlation(std::uint32_t correlation, std::int64_t duration_ns, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = correlations_.find(correlation);
  if (it == correlations_.end() || it->second >= ops_.size()) return;
  trace::Op& op = ops_[it->second];
  // One launch can run as several activity records (e.g. a copy split in parts): sum them.
  op.duration_ns += std::max<std::int64_t>(duration_ns, 0);
  if (bytes != 0 && op.bytes == 0) op.bytes = bytes;
}

void Recorder::mark_step() {
  std::lock_guard lock(mutex_);
  phase_ = trace::Phase::unknown;
  if (finished()) return;
  // A marker with no op since the previous one (or at the very start) adds no iteration, so
  // calling step() at the start or at the end of each training step both work.
  const std::size_t previous = step_marks_.empty() ? 0 : step_marks_.back();
  if (ops_.size() == previous) return;
  step_marks_.push_back(ops_.size());
  step_mark_ns_.push_back(now());
  if (options_.iterations != 0 && step_marks_.size() >= options_.iterations) finish_locked(ops_.size());
}

void Recorder::finish() {
  std::lock_guard lock(mutex_);
  if (!finished()) finish_locked(ops_.size());
}

void Recorder::mark_phase(trace::Phase phase) {
  std::lock_guard lock(mutex_);
  phase_ = phase;
}

std::size_t Recorder::op_count() const {
  std::lock_guard lock(mutex_);
  return ops_.size();
}

std::size_t Recorder::steps_marked() const {
  std::lock_guard lock(mutex_);
  return step_marks_.size();
}

std::vector<LiveBlock> Recorder::blocks_in_params(std::span<const std::byte> params) const {
  std::lock_guard lock(mutex_);
  return param_blocks(params, live_);
}

std::size_t Recorder::block_count() const {
  std::lock_guard lock(mutex_);
  return blocks_.size();
}

void Recorder::set_gpu(trace::GpuInfo gpu) {
  std::lock_guard lock(mutex_);
  gpu_ = std::move(gpu);
}

void Recorder::set_metadata(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  metadata_[key] = value;
}

void Recorder::add_callback_overhead(std::chrono::nanoseconds spent) {
  callback_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(spent.count(), 0)), std::memory_order_relaxed);
  callbacks_.fetch_add(1, std::memory_order_relaxed);
}

void Recorder::maybe_detect_locked() {
  if (options_.iterations == 0 || !step_marks_.empty() || ops_.size() < next_detection_at_) return;
  next_detection_at_ = ops_.size() + std::max(options_.first_detection_at, ops_.size() / 4);
  std::vector<std::uint32_t> names;
  std::vector<std::uint64_t> live;
  names.reserve(extras_.size());
  live.reserve(extras_.size());
  for (const OpExtra& extra : extras_) {
    names.push_back(extra.name_id);
    live.push_back(extra.live_bytes);
  }
  // One more period than recorded confirms the cycle before the recording ends on it.
  DetectionOptions detection = options_.detection;
  detection.min_repeats = std::max<std::size_t>(detection.min_repeats, options_.iterations + 1);
  std::string refused;
  auto found = detect_iterations(names, live, detection, &refused);
  if (!refused.empty() && !metadata_.count("iteration_detection_refused")) {
    // Said once: without it a job that keeps memory from every step would record on silently.
    log::warn("DELTA recorder: no training iterations yet: {}; call delta_step() at each step to mark them", refused);
    metadata_["iteration_detection_refused"] = refused;
  }
  if (!found || found->complete < detection.min_repeats) return;
  detected_ = found;
  finish_locked(found->first_boundary + static_cast<std::size_t>(options_.iterations) * found->period);
  log::info("DELTA recorder: iterations of {} launches detected after {} warm-up launches", found->period,
            found->first_boundary);
}

void Recorder::finish_locked(std::size_t end_op) {
  end_op = std::min(end_op, ops_.size());
  if (end_op < ops_.size()) {
    // What happened after the last kept op is not part of the trace: blocks allocated after
    // it are dropped (ids stay dense, they are the newest), frees after it did not happen yet.
    const std::int64_t cut = ops_[end_op].start_ns;
    ops_.resize(end_op);
    extras_.resize(end_op);
    while (!blocks_.empty() && blocks_.back().alloc_ns > cut) blocks_.pop_back();
    for (trace::Block& block : blocks_) {
      if (block.free_ns > cut) block.free_ns = trace::kNever;
    }
  }
  end_ns_ = now();
  finished_.store(true, std::memory_order_release);
}

Recorder::Boundaries Recorder::boundaries_locked() const {
  Boundaries out;
  const std::size_t n = ops_.size();
  out.end = n;
  if (n == 0) {
    out.method = step_marks_.empty() ? "none" : "markers";
    return out;
  }
  if (!step_marks_.empty()) {
    out.method = "markers";
    out.starts.push_back(0);
    out.start_ns.push_back(-1);
    for (std::size_t k = 0; k < step_marks_.size(); ++k) {
      if (step_marks_[k] >= n) continue;
      out.starts.push_back(step_marks_[k]);
      out.start_ns.push_back(step_mark_ns_[k]);
    }
    out.last_complete = step_marks_.back() == n;
    return out;
  }
  std::optional<DetectedIterations> found = detected_;
  std::size_t complete = found ? options_.iterations : 0;
  if (!found) {
    std::vector<std::uint32_t> names;
    std::vector<std::uint64_t> live;
    for (const OpExtra& extra : extras_) {
      names.push_back(extra.name_id);
      live.push_back(extra.live_bytes);
    }
    found = detect_iterations(names, live, options_.detection);
    if (found) complete = found->complete;
  }
  if (!found) {
    out.method = "none";
    out.starts.push_back(0);
    out.last_complete = false;
    return out;
  }
  out.method = "automatic";
  out.warmup = found->first_boundary > 0;
  if (out.warmup) out.starts.push_back(0);
  for (std::size_t k = 0; k < complete; ++k) out.starts.push_back(found->first_boundary + k * found->period);
  const std::size_t complete_end = found->first_boundary + complete * found->period;
  if (complete_end < n) {
    out.starts.push_back(complete_end);
    out.last_complete = false;
  }
  return out;
}

trace::Trace Recorder::snapshot() const {
  std::lock_guard lock(mutex_);
  trace::Trace out;
  out.source = "delta-recorder";
  out.gpu = gpu_;
  out.metadata = metadata_;
  out.blocks = blocks_;

  const Boundaries bounds = boundaries_locked();
  out.ops.assign(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(bounds.end));
  std::vector<std::uint32_t> threads;
  std::vector<bool> explicit_phase;
  for (std::size_t i = 0; i < bounds.end; ++i) {
    threads.push_back(extras_[i].thread);
    explicit_phase.push_back(extras_[i].explicit_phase);
  }
  std::uint64_t without_duration = 0;
  for (const trace::Op& op : out.ops) without_duration += op.duration_ns == 0 ? 1 : 0;

  for (std::size_t k = 0; k < bounds.starts.size(); ++k) {
    const std::size_t begin = bounds.starts[k];
    const std::size_t end = k + 1 < bounds.starts.size() ? bounds.starts[k + 1] : bounds.end;
    trace::Iteration iteration;
    iteration.index = static_cast<std::uint32_t>(k);
    iteration.first_op = begin;
    iteration.end_op = end;
    // An iteration a marker began starts at the marker, so that the blocks allocated before
    // its first op (its inputs, the first op's outputs) are the step's, not live before it.
    const auto marked = [&](std::size_t at) { return at < bounds.start_ns.size() && bounds.start_ns[at] >= 0; };
    iteration.start_ns = marked(k) ? bounds.start_ns[k] : out.ops[begin].start_ns;
    if (k + 1 < bounds.starts.size()) {
      iteration.end_ns = marked(k + 1) ? bounds.start_ns[k + 1] : out.ops[end].start_ns;
    } else {
      std::int64_t last = out.ops[begin].start_ns;
      for (std::size_t i = begin; i < end; ++i) last = std::max(last, out.ops[i].start_ns + out.ops[i].duration_ns);
      iteration.end_ns = last;
    }
    for (std::size_t i = begin; i < end; ++i) out.ops[i].iteration = iteration.index;
    infer_phases(out.ops, threads, explicit_phase, begin, end);
    out.iterations.push_back(iteration);
  }

  const std::uint64_t callbacks = callbacks_.load(), callback_ns = callback_ns_.load();
  const std::uint64_t hooks = hooks_.load(), hook_ns = hook_ns_.load();
  out.metadata["iteration_detection"] = bounds.method;
  out.metadata["warmup_iteration"] = bounds.warmup ? "true" : "false";
  out.metadata["last_iteration_complete"] = bounds.last_complete ? "true" : "false";
  out.metadata["iterations_requested"] = std::to_string(options_.iterations);
  out.metadata["recording_finished"] = finished() ? "true" : "false";
  out.metadata["op_start"] = "host issue time; duration_ns is the device execution time";
  out.metadata["recorder_callbacks"] = std::to_string(callbacks);
  out.metadata["recorder_callback_ns"] = std::to_string(callback_ns);
  out.metadata["recorder_alloc_hooks"] = std::to_string(hooks);
  out.metadata["recorder_alloc_hook_ns"] = std::to_string(hook_ns);
  out.metadata["recorder_overhead_ns"] = std::to_string(callback_ns + hook_ns);
  out.metadata["recorder_overhead_per_op_ns"] =
      std::to_string(out.ops.empty() ? 0 : (callback_ns + hook_ns) / out.ops.size());
  out.metadata["ops_without_duration"] = std::to_string(without_duration);
  out.metadata["frees_of_unknown_blocks"] = std::to_string(unknown_frees_);
  out.metadata["blocks_closed_by_overlap"] = std::to_string(overlaps_);
  return out;
}

}  // namespace delta::profiler
