// The simulated GPU (see sim_device_core.hpp): copies, memsets and the host's synchronous
// access to device memory, and the issue path every operation shares: checks, hazards, the
// effect on content, the clock, the observer.
#include "device/sim/sim_device_core.hpp"

#include "device/sim/sim_errors.hpp"
#include "device/sim/clock/sim_timing.hpp"

#include <stdexcept>
#include <utility>

namespace delta::sim {

namespace {
std::uintptr_t address(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }
}  // namespace

// ---- the issue path ----

SimDeviceImpl::Pending SimDeviceImpl::prepare(std::string what, StreamHandle stream, std::uint64_t host_delay_ns,
                                              std::uint64_t duration_ns, std::vector<Access> accesses) {
  StreamIdentity identity = clock_.identity(stream);
  const std::uint64_t now = clock_.now();
  const std::uint64_t start = clock_.start_time(stream, host_delay_ns);
  auto record = std::make_shared<OpRecord>(
      OpRecord{std::move(what), std::move(identity.label), identity.queue, now, start, start + duration_ns});
  hazards_.check_op(*record, accesses, now);
  return Pending{std::move(record), std::move(accesses), host_delay_ns, duration_ns};
}

std::optional<SimDevice::Activity> SimDeviceImpl::issue(const Pending& pending, Activity::Kind kind,
                                                        const std::string& name, StreamHandle stream,
                                                        std::vector<SimRange> reads, std::vector<SimRange> writes) {
  clock_.advance(pending.host_delay_ns);
  const Interval when = clock_.issue(stream, pending.duration_ns);
  if (when.start_ns != pending.record->start_ns) {
    throw std::logic_error(fmt::format("sim: {} started at {} ns, its hazard check assumed {} ns", pending.record->what,
                                       when.start_ns, pending.record->start_ns));
  }
  hazards_.record(pending.record, pending.accesses, clock_.now());
  if (!observer_) return std::nullopt;
  return Activity{kind, name, stream, when.start_ns, when.end_ns, std::move(reads), std::move(writes)};
}

void SimDeviceImpl::notify(std::unique_lock<std::mutex> lock, std::optional<Activity> activity) {
  if (!activity) return;
  const std::shared_ptr<const Observer> observer = observer_;
  lock.unlock();
  (*observer)(*activity);
}

void SimDeviceImpl::add_host_access(std::vector<Access>& accesses, const void* ptr, std::size_t bytes,
                                    bool write) const {
  if (pinned_.covers(ptr, bytes)) accesses.push_back({address(ptr), bytes, write});
}

void SimDeviceImpl::check_host_access(const char* operation, DevicePtr ptr, std::size_t bytes, bool host_writes) {
  hazards_.check_host(operation, ptr, bytes, host_writes, clock_.now());
}

void SimDeviceImpl::require_host_pointer(const char* operation, const void* ptr) {
  if (ptr == nullptr) fail(DeviceErrc::invalid_value, "{}: the host pointer is null", operation);
}

void SimDeviceImpl::require_backing(const char* operation, DevicePtr ptr) const {
  if (!memory_.backed()) {
    fail(DeviceErrc::invalid_value,
         "{}({}): memory is not backed on this sim device (SimContent::none, or back_memory = false), so it holds no "
         "bytes",
         operation, hex(ptr));
  }
}

// ---- copies and memsets ----

void SimDeviceImpl::copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, StreamHandle stream) {
  constexpr const char* kOp = "copy_h2d_async";
  std::unique_lock lock(mutex_);
  clock_.check_stream(kOp, stream);
  if (bytes == 0) return;
  maybe_fail(SimFault::copy_h2d, kOp);
  require_host_pointer(kOp, src);
  memory_.check_mapped(kOp, dst, bytes);
  std::uint64_t offset = 0;
  const SymbolicContent* host = pinned_.symbolic(kOp, src, bytes, &offset);
  const bool pinned = pinned_.covers(src, bytes);
  std::vector<Access> accesses{{dst, bytes, true}};
  add_host_access(accesses, src, bytes, false);
  const Pending pending =
      prepare(kOp, stream, 0, transfer_duration_ns(profile_, CopyKind::h2d, bytes, pinned), std::move(accesses));
  if (host != nullptr) {
    memory_.store(kOp, dst, host->extract(offset, bytes));
  } else {
    memory_.copy_in(kOp, dst, src, bytes);
  }
  bytes_h2d_ += bytes;
  notify(std::move(lock), issue(pending, Activity::Kind::h2d, "h2d", stream, {}, {{dst, bytes}}));
}

void SimDeviceImpl::copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, StreamHandle stream) {
  constexpr const char* kOp = "copy_d2h_async";
  std::unique_lock lock(mutex_);
  clock_.check_stream(kOp, stream);
  if (bytes == 0) return;
  maybe_fail(SimFault::copy_d2h, kOp);
  require_host_pointer(kOp, dst);
  memory_.check_mapped(kOp, src, bytes);
  std::uint64_t offset = 0;
  SymbolicContent* host = pinned_.symbolic(kOp, dst, bytes, &offset);
  const bool pinned = pinned_.covers(dst, bytes);
  std::vector<Access> accesses{{src, bytes, false}};
  add_host_access(accesses, dst, bytes, true);
  const Pending pending =
      prepare(kOp, stream, 0, transfer_duration_ns(profile_, CopyKind::d2h, bytes, pinned), std::move(accesses));
  if (host != nullptr) {
    host->assign(offset, memory_.extract(kOp, src, bytes));
  } else {
    memory_.copy_out(kOp, dst, src, bytes);
  }
  bytes_d2h_ += bytes;
  notify(std::move(lock), issue(pending, Activity::Kind::d2h, "d2h", stream, {{src, bytes}}, {}));
}

void SimDeviceImpl::copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, StreamHandle stream) {
  constexpr const char* kOp = "copy_d2d_async";
  std::unique_lock lock(mutex_);
  clock_.check_stream(kOp, stream);
  if (bytes == 0) return;
  memory_.check_mapped(kOp, src, bytes);
  memory_.check_mapped(kOp, dst, bytes);
  const Pending pending = prepare(kOp, stream, 0, transfer_duration_ns(profile_, CopyKind::d2d, bytes, true),
                                  {{src, bytes, false}, {dst, bytes, true}});
  memory_.copy_within(kOp, dst, src, bytes);
  bytes_d2d_ += bytes;
  notify(std::move(lock), issue(pending, Activity::Kind::d2d, "d2d", stream, {{src, bytes}}, {{dst, bytes}}));
}

void SimDeviceImpl::memset_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) {
  fill_async("memset_async", dst, value, bytes, stream, transfer_duration_ns(profile_, CopyKind::memset, bytes, true));
}

void SimDeviceImpl::initialise_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) {
  fill_async("initialise_async", dst, value, bytes, stream, 1);
}

void SimDeviceImpl::fill_async(const char* op, DevicePtr dst, std::uint8_t value, std::size_t bytes,
                               StreamHandle stream, std::uint64_t duration_ns) {
  std::unique_lock lock(mutex_);
  clock_.check_stream(op, stream);
  if (bytes == 0) return;
  memory_.check_mapped(op, dst, bytes);
  const Pending pending = prepare(op, stream, 0, duration_ns, {{dst, bytes, true}});
  memory_.fill(op, dst, value, bytes);
  notify(std::move(lock), issue(pending, Activity::Kind::memset, "memset", stream, {}, {{dst, bytes}}));
}

// ---- the host's synchronous access ----

void SimDeviceImpl::write(DevicePtr dst, std::span<const std::uint8_t> bytes) {
  std::lock_guard lock(mutex_);
  memory_.check_mapped("write", dst, bytes.size());
  require_backing("write", dst);
  check_host_access("write", dst, bytes.size(), true);
  memory_.copy_in("write", dst, bytes.data(), bytes.size());
}

void SimDeviceImpl::read(DevicePtr src, std::span<std::uint8_t> out) {
  std::lock_guard lock(mutex_);
  memory_.check_mapped("read", src, out.size());
  require_backing("read", src);
  check_host_access("read", src, out.size(), false);
  memory_.copy_out("read", out.data(), src, out.size());
}

std::uint64_t SimDeviceImpl::digest(DevicePtr ptr, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  memory_.check_mapped("digest", ptr, bytes);
  require_backing("digest", ptr);
  check_host_access("digest", ptr, bytes, false);
  return memory_.hash("digest", ptr, bytes, false);
}

}  // namespace delta::sim
