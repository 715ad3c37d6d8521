#include "profiler/sim_source.hpp"

#include "profiler/param_scan.hpp"

#include <chrono>

namespace delta::profiler {
namespace {

trace::OpKind op_kind(SimDevice::Activity::Kind kind) {
  switch (kind) {
    case SimDevice::Activity::Kind::kernel: return trace::OpKind::kernel;
    case SimDevice::Activity::Kind::h2d: return trace::OpKind::copy_h2d;
    case SimDevice::Activity::Kind::d2h: return trace::OpKind::copy_d2h;
    case SimDevice::Activity::Kind::d2d: return trace::OpKind::copy_d2d;
    case SimDevice::Activity::Kind::memset: return trace::OpKind::memset;
  }
  return trace::OpKind::kernel;
}

std::uint64_t moved_bytes(const SimDevice::Activity& activity) {
  if (activity.kind == SimDevice::Activity::Kind::kernel) return 0;
  std::uint64_t bytes = 0;
  // A copy reads and writes the same number of bytes; count one side.
  const auto& side = activity.writes.empty() ? activity.reads : activity.writes;
  for (const SimRange& range : side) bytes += range.bytes;
  return bytes;
}

}  // namespace

Recorder::Clock sim_clock(SimDevice& device) {
  return [&device] { return static_cast<std::int64_t>(device.now_ns()); };
}

SimActivitySource::SimActivitySource(SimDevice& device, Recorder& recorder, DirectionLearner* learner)
    : device_(device), recorder_(recorder), learner_(learner) {
  device_.set_activity_observer([this](const SimDevice::Activity& activity) {
    if (internal_) return;  // the source's own copies and replays: not the program's
    const auto start = std::chrono::steady_clock::now();
    observe(activity);
    recorder_.add_callback_overhead(std::chrono::steady_clock::now() - start);
    if (tap_) tap_(activity);
  });
  if (learner_) device_.set_launch_hook([this](const SimLaunch& launch, StreamHandle stream) { before_launch(launch, stream); });
  attached_ = true;
}

SimActivitySource::~SimActivitySource() { stop(); }

void SimActivitySource::stop() {
  if (!attached_) return;
  device_.set_activity_observer({});
  if (learner_) device_.set_launch_hook({});
  attached_ = false;
}

std::string SimActivitySource::describe() const {
  return learner_ ? "the sim device's activity observer, learning directions from fingerprints"
                  : "the sim device's activity observer";
}

void SimActivitySource::before_launch(const SimLaunch& launch, StreamHandle stream) {
  if (recorder_.finished() || internal_) return;
  std::lock_guard lock(learning_mutex_);
  const std::size_t iteration = recorder_.steps_marked();
  if (iteration != position_iteration_) {
    position_iteration_ = iteration;
    next_position_ = 0;
  }
  const std::uint32_t position = next_position_++;
  ticket_.reset();
  if (launch.params.empty() || !learner_->learning(static_cast<std::uint32_t>(iteration))) return;
  // Only the parameter bytes: what a launch shows on a GPU.
  const auto* bytes = reinterpret_cast<const std::byte*>(launch.params.data());
  std::vector<TouchedBlock> touched;
  for (const LiveBlock& block : recorder_.blocks_in_params({bytes, launch.params.size()}))
    touched.push_back({block.id, block.address, block.size});
  const bool replaying = learner_->replaying(static_cast<std::uint32_t>(iteration));
  if (replaying) staged_blocks_ = touched;
  ticket_ = learner_->before(static_cast<std::uint32_t>(iteration), position, launch.name, std::move(touched), stream);
  staged_.reset();
  if (replaying && !stage(launch, stream, staged_blocks_)) staged_.reset();
}

bool SimActivitySource::stage(const SimLaunch& launch, StreamHandle stream, const std::vector<TouchedBlock>& blocks) {
  const std::size_t g = device_.granularity();
  std::size_t need = 0;
  for (const TouchedBlock& b : blocks) need += 2 * ((b.bytes + 255) / 256 * 256);
  if (need == 0) return false;
  Staged s;
  s.capture = launch;
  s.stream = stream;
  s.bytes = (need + g - 1) / g * g;
  internal_ = true;
  try {
    s.base = device_.reserve(s.bytes);
    try {
      s.handle = device_.create_physical(s.bytes);
    } catch (const DeviceError&) {
      device_.release_reservation(s.base, s.bytes);
      internal_ = false;
      return false;  // no room for copies: this launch goes without replays
    }
    device_.map(s.base, s.bytes, s.handle);
    std::uint64_t at = s.base;
    for (const TouchedBlock& b : blocks) {
      s.exact.push_back({at, b.bytes});
      device_.copy_d2d_async(at, b.address, b.bytes, stream);
      at += (b.bytes + 255) / 256 * 256;
    }
    for (const TouchedBlock& b : blocks) {
      s.permuted.push_back({at, b.bytes});
      at += (b.bytes + 255) / 256 * 256;
    }
  } catch (...) {
    internal_ = false;
    throw;
  }
  internal_ = false;
  staged_ = std::move(s);
  return true;
}

SimLaunch SimActivitySource::repointed(const std::vector<FingerprintRange>& copies) const {
  // Every parameter word that points into a touched block points into its copy instead.
  std::vector<std::pair<DevicePtr, DevicePtr>> moves;
  const auto& params = staged_->capture.params;
  for (std::size_t at = 0; at + 8 <= params.size(); at += 8) {
    std::uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word |= std::uint64_t{params[at + i]} << (8 * i);
    for (std::size_t k = 0; k < staged_blocks_.size(); ++k) {
      const TouchedBlock& b = staged_blocks_[k];
      if (word >= b.address && word < b.address + b.bytes) moves.emplace_back(word, copies[k].address + (word - b.address));
    }
  }
  return sim_repoint(staged_->capture, moves);
}

void SimActivitySource::replay(std::size_t ticket) {
  Staged& s = *staged_;
  internal_ = true;
  try {
    device_.launch(repointed(s.exact), s.stream);
    learner_->copies(ticket, DirectionLearner::Copies::replayed, s.exact, s.stream);
    // The same values elsewhere: each copy rotated by 16 bytes (whole elements of any type
    // up to 16 bytes), so indices stay indices and the replay stays in bounds.
    for (std::size_t k = 0; k < s.exact.size(); ++k) {
      const FingerprintRange from = s.exact[k], to = s.permuted[k];
      if (from.bytes >= 32) {
        device_.copy_d2d_async(to.address, from.address + 16, from.bytes - 16, s.stream);
        device_.copy_d2d_async(to.address + from.bytes - 16, from.address, 16, s.stream);
      } else {
        device_.copy_d2d_async(to.address, from.address, from.bytes, s.stream);
      }
    }
    learner_->copies(ticket, DirectionLearner::Copies::permuted_before, s.permuted, s.stream);
    device_.launch(repointed(s.permuted), s.stream);
    learner_->copies(ticket, DirectionLearner::Copies::permuted_after, s.permuted, s.stream);
    // The copies go once the replays are done (an unmap does not wait for kernels).
    device_.synchronize_stream(s.stream);
    device_.unmap(s.base, s.bytes);
    device_.release_physical(s.handle);
    device_.release_reservation(s.base, s.bytes);
  } catch (...) {
    internal_ = false;
    staged_.reset();
    throw;
  }
  internal_ = false;
  staged_.reset();
}

void SimActivitySource::observe(const SimDevice::Activity& activity) {
  std::vector<std::uint64_t> used;
  OpInfo info;
  info.name = activity.name;
  info.kind = op_kind(activity.kind);
  info.stream = activity.stream;
  info.duration_ns = static_cast<std::int64_t>(activity.end_ns - activity.start_ns);
  info.bytes = moved_bytes(activity);
  recorder_.add_op(std::move(info), [&](const BlockMap& blocks, trace::Op& op) {
    attribute(activity, blocks, op);
    for (const trace::BlockUse& use : op.blocks) used.push_back(use.block);
  });
  if (!learner_) return;
  std::lock_guard lock(learning_mutex_);
  if (activity.kind == SimDevice::Activity::Kind::kernel && ticket_) {
    learner_->after(*ticket_);
    if (staged_) replay(*ticket_);
    ticket_.reset();
  } else {
    learner_->note_uses(used);
  }
}

void SimActivitySource::attribute(const SimDevice::Activity& activity, const BlockMap& blocks, trace::Op& op) {
  if (activity.opaque()) {
    // As on a GPU: pointers found in the parameters, direction unknown.
    scan_param_buffer({reinterpret_cast<const std::byte*>(activity.params.data()), activity.params.size()}, blocks,
                      op.blocks);
    return;
  }
  for (const SimRange& range : activity.reads) attribute_range(range.ptr, range.bytes, trace::Access::read, blocks, op.blocks);
  for (const SimRange& range : activity.writes) attribute_range(range.ptr, range.bytes, trace::Access::write, blocks, op.blocks);
}

void SimActivitySource::record(Recorder& recorder, const SimDevice::Activity& activity) {
  OpInfo info;
  info.name = activity.name;
  info.kind = op_kind(activity.kind);
  info.stream = activity.stream;
  info.duration_ns = static_cast<std::int64_t>(activity.end_ns - activity.start_ns);
  info.bytes = moved_bytes(activity);
  recorder.add_op(std::move(info), [&activity](const BlockMap& blocks, trace::Op& op) { attribute(activity, blocks, op); });
}

// The ground truth of an opaque launch, for tests and `deltactl execute --record`: the same
// op with the directions the sim knows.
void SimActivitySource::record_truth(Recorder& recorder, const SimDevice::Activity& activity) {
  SimDevice::Activity known = activity;
  if (known.opaque()) {
    known.reads = activity.truth_reads;
    known.writes = activity.truth_writes;
    known.params.clear();
  }
  record(recorder, known);
}

}  // namespace delta::profiler
