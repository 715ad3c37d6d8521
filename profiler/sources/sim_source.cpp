#include "profiler/sources/sim_source.hpp"

#include "profiler/directions/own_work.hpp"
#include "profiler/directions/param_scan.hpp"

#include <chrono>
#include <thread>

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
    if (internal()) return;  // the source's own copies and replays: not the program's
    if (!issuing_own_work()) {  // DELTA's own moves in auto mode (own_work.hpp): not recorded, still tapped
      const auto start = std::chrono::steady_clock::now();
      observe(activity);
      recorder_.add_callback_overhead(std::chrono::steady_clock::now() - start);
    }
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

namespace {

// The source whose own copies and replays this thread is issuing: their activities are not
// the program's. Per thread, so a launch of another program thread meanwhile is recorded.
thread_local const SimActivitySource* t_internal = nullptr;

class InternalScope {
 public:
  explicit InternalScope(const SimActivitySource* source) : previous_(t_internal) { t_internal = source; }
  ~InternalScope() { t_internal = previous_; }
  InternalScope(const InternalScope&) = delete;
  InternalScope& operator=(const InternalScope&) = delete;

 private:
  const SimActivitySource* previous_;
};

std::size_t padded(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

bool SimActivitySource::internal() const { return t_internal == this; }

void SimActivitySource::before_launch(const SimLaunch& launch, StreamHandle stream) {
  if (recorder_.finished() || internal() || issuing_own_work()) return;
  std::lock_guard lock(learning_mutex_);
  const std::size_t iteration = recorder_.steps_marked();
  if (iteration != position_iteration_) {
    position_iteration_ = iteration;
    next_position_ = 0;
  }
  const std::uint32_t position = next_position_++;
  InFlight& mine = in_flight_[std::this_thread::get_id()];
  if (mine.staged) release(*mine.staged);  // its launch was refused: no activity came
  mine = {};
  if (launch.params.empty() || !learner_->learning(static_cast<std::uint32_t>(iteration))) return;
  // Only the parameter bytes: what a launch shows on a GPU.
  const auto* bytes = reinterpret_cast<const std::byte*>(launch.params.data());
  std::vector<TouchedBlock> touched;
  for (const LiveBlock& block : recorder_.blocks_in_params({bytes, launch.params.size()}))
    touched.push_back({block.id, block.address, block.size});
  if (learner_->replaying(static_cast<std::uint32_t>(iteration))) mine.staged = stage(launch, stream, touched);
  mine.ticket = learner_->before(static_cast<std::uint32_t>(iteration), position, launch.name, std::move(touched), stream);
}

std::optional<SimActivitySource::Staged> SimActivitySource::stage(const SimLaunch& launch, StreamHandle stream,
                                                                  const std::vector<TouchedBlock>& blocks) {
  const std::size_t g = device_.granularity();
  std::size_t need = 0;
  for (const TouchedBlock& b : blocks) need += 2 * padded(b.bytes);
  if (need == 0) return std::nullopt;
  InternalScope scope(this);
  Staged s;
  s.capture = launch;
  s.stream = stream;
  s.blocks = blocks;
  s.bytes = (need + g - 1) / g * g;
  s.base = device_.reserve(s.bytes);
  try {
    s.handle = device_.create_physical(s.bytes);
  } catch (const DeviceError&) {
    device_.release_reservation(s.base, s.bytes);
    return std::nullopt;  // no room for copies: this launch goes without replays
  }
  device_.map(s.base, s.bytes, s.handle);
  std::uint64_t at = s.base;
  for (const TouchedBlock& b : blocks) {
    s.exact.push_back({at, b.bytes});
    device_.copy_d2d_async(at, b.address, b.bytes, stream);
    at += padded(b.bytes);
  }
  for (const TouchedBlock& b : blocks) {
    s.permuted.push_back({at, b.bytes});
    at += padded(b.bytes);
  }
  return s;
}

SimLaunch SimActivitySource::repointed(const Staged& s, const std::vector<FingerprintRange>& copies) {
  // Every parameter word that points into a touched block points into its copy instead.
  std::vector<std::pair<DevicePtr, DevicePtr>> moves;
  const auto& params = s.capture.params;
  for (std::size_t at = 0; at + 8 <= params.size(); at += 8) {
    std::uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word |= std::uint64_t{params[at + i]} << (8 * i);
    for (std::size_t k = 0; k < s.blocks.size(); ++k) {
      const TouchedBlock& b = s.blocks[k];
      if (word >= b.address && word < b.address + b.bytes) moves.emplace_back(word, copies[k].address + (word - b.address));
    }
  }
  return sim_repoint(s.capture, moves);
}

void SimActivitySource::replay(const Staged& s, std::size_t ticket) {
  InternalScope scope(this);
  device_.launch(repointed(s, s.exact), s.stream);
  learner_->copies(ticket, DirectionLearner::Copies::replayed, s.exact, s.stream);
  // The same values elsewhere: each copy rotated by 16 bytes (whole elements of any type up
  // to 16 bytes), so indices stay indices and the replay stays in bounds.
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
  device_.launch(repointed(s, s.permuted), s.stream);
  learner_->copies(ticket, DirectionLearner::Copies::permuted_after, s.permuted, s.stream);
  release(s);
}

void SimActivitySource::release(const Staged& s) {
  InternalScope scope(this);
  // The copies go once the replays are done (an unmap does not wait for kernels).
  device_.synchronize_stream(s.stream);
  device_.unmap(s.base, s.bytes);
  device_.release_physical(s.handle);
  device_.release_reservation(s.base, s.bytes);
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
  auto mine = in_flight_.find(std::this_thread::get_id());
  if (activity.kind == SimDevice::Activity::Kind::kernel && mine != in_flight_.end() && mine->second.ticket) {
    const InFlight launch = std::move(mine->second);
    in_flight_.erase(mine);
    learner_->after(*launch.ticket);
    if (launch.staged) replay(*launch.staged, *launch.ticket);
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
