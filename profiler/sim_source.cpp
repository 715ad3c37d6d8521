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
  if (recorder_.finished()) return;
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
  ticket_ = learner_->before(static_cast<std::uint32_t>(iteration), position, launch.name, std::move(touched), stream);
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
