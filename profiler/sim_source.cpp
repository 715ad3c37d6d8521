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

SimActivitySource::SimActivitySource(SimDevice& device, Recorder& recorder) : device_(device), recorder_(recorder) {
  device_.set_activity_observer([this](const SimDevice::Activity& activity) {
    const auto start = std::chrono::steady_clock::now();
    record(recorder_, activity);
    recorder_.add_callback_overhead(std::chrono::steady_clock::now() - start);
  });
  attached_ = true;
}

SimActivitySource::~SimActivitySource() { stop(); }

void SimActivitySource::stop() {
  if (!attached_) return;
  device_.set_activity_observer({});
  attached_ = false;
}

std::string SimActivitySource::describe() const { return "the sim device's activity observer"; }

void SimActivitySource::record(Recorder& recorder, const SimDevice::Activity& activity) {
  OpInfo info;
  info.name = activity.name;
  info.kind = op_kind(activity.kind);
  info.stream = activity.stream;
  info.duration_ns = static_cast<std::int64_t>(activity.end_ns - activity.start_ns);
  info.bytes = moved_bytes(activity);
  recorder.add_op(std::move(info), [&activity](const BlockMap& blocks, trace::Op& op) {
    for (const SimRange& range : activity.reads) attribute_range(range.ptr, range.bytes, trace::Access::read, blocks, op.blocks);
    for (const SimRange& range : activity.writes) attribute_range(range.ptr, range.bytes, trace::Access::write, blocks, op.blocks);
  });
}

}  // namespace delta::profiler
