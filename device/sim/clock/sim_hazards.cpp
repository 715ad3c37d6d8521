#include "device/sim/clock/sim_hazards.hpp"

#include "device/sim/sim_errors.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <tuple>

namespace delta::sim {

namespace {

const char* verb(bool write) { return write ? "writes" : "reads"; }

std::string range(std::uintptr_t lo, std::uintptr_t hi) {
  return fmt::format("[{}, {}) ({} bytes)", hex(lo), hex(hi), hi - lo);
}

std::string describe(const OpRecord& op) {
  return fmt::format("{} on {} (issued at host time {} ns, runs {}..{} ns)", op.what, op.stream, op.issued_ns, op.start_ns,
                     op.end_ns);
}

}  // namespace

void HazardTracker::drop_ended(Segment& segment, std::uint64_t now) {
  std::erase_if(segment.entries, [now](const Entry& entry) { return entry.op->end_ns <= now; });
}

void HazardTracker::prune(std::uint64_t now) {
  if (segments_.empty()) return;
  if (now >= latest_end_) {
    segments_.clear();
    sweep_above_ = 64;
    return;
  }
  if (segments_.size() <= sweep_above_) return;
  for (auto it = segments_.begin(); it != segments_.end();) {
    drop_ended(it->second, now);
    it = it->second.entries.empty() ? segments_.erase(it) : std::next(it);
  }
  coalesce(0, ~std::uintptr_t{0});
  sweep_above_ = std::max<std::size_t>(64, 2 * segments_.size());
}

HazardTracker::Map::iterator HazardTracker::first_overlapping(std::uintptr_t lo) {
  auto it = segments_.upper_bound(lo);
  if (it != segments_.begin() && std::prev(it)->second.end > lo) --it;
  return it;
}

void HazardTracker::check_op(const OpRecord& op, std::span<const Access> accesses, std::uint64_t now) {
  prune(now);
  for (const Access& access : accesses) {
    if (access.bytes == 0) continue;
    const std::uintptr_t lo = access.ptr, hi = access.ptr + access.bytes;
    for (auto it = first_overlapping(lo); it != segments_.end() && it->first < hi; ++it) {
      for (const Entry& entry : it->second.entries) {
        const OpRecord& other = *entry.op;
        // Ordered: the same queue, or the new operation starts after the other one ended.
        if (other.queue == op.queue || other.end_ns <= op.start_ns) continue;
        if (!access.write && !entry.write) continue;
        const char* kind = !access.write ? "read-after-write" : entry.write ? "write-after-write" : "write-after-read";
        fail(DeviceErrc::hazard,
             "hazard ({} across streams): {} {} {}, while {}, issued earlier, {} {}; they overlap at {}. A GPU may run "
             "them in either order: order them with record_event and stream_wait_event, or issue them on one stream",
             kind, describe(op), verb(access.write), range(lo, hi), describe(other), verb(entry.write),
             range(entry.lo, entry.hi), range(std::max(lo, it->first), std::min(hi, it->second.end)));
      }
    }
  }
}

void HazardTracker::check_host(const char* operation, std::uintptr_t ptr, std::size_t bytes, bool host_writes,
                               std::uint64_t now) {
  prune(now);
  if (bytes == 0) return;
  const std::uintptr_t lo = ptr, hi = ptr + bytes;
  for (auto it = first_overlapping(lo); it != segments_.end() && it->first < hi; ++it) {
    for (const Entry& entry : it->second.entries) {
      if (entry.op->end_ns <= now || (!host_writes && !entry.write)) continue;
      fail(DeviceErrc::hazard,
           "hazard: {}({}, {} bytes) at host time {} ns touches {} while {} still {} {} (overlap {}); the host does not "
           "wait for device work: synchronize first (synchronize_stream, synchronize_event, or a query_event that "
           "returned true)",
           operation, hex(ptr), bytes, now, range(lo, hi), describe(*entry.op), verb(entry.write), range(entry.lo, entry.hi),
           range(std::max(lo, it->first), std::min(hi, it->second.end)));
    }
  }
}

void HazardTracker::split(std::uintptr_t at) {
  auto it = segments_.upper_bound(at);
  if (it == segments_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Segment tail{it->second.end, it->second.entries};
  it->second.end = at;
  segments_.emplace_hint(std::next(it), at, std::move(tail));
}

void HazardTracker::add(Segment& segment, const Entry& entry) {
  const auto key = [](const Entry& e) { return std::make_tuple(e.op->queue, e.write); };
  const auto it = std::lower_bound(segment.entries.begin(), segment.entries.end(), entry,
                                   [&](const Entry& a, const Entry& b) { return key(a) < key(b); });
  if (it != segment.entries.end() && key(*it) == key(entry)) {
    // The same queue's later operation ends no earlier: it stands for both.
    if (it->op->end_ns <= entry.op->end_ns) *it = entry;
    return;
  }
  segment.entries.insert(it, entry);
}

void HazardTracker::coalesce(std::uintptr_t lo, std::uintptr_t hi) {
  auto it = segments_.upper_bound(lo);
  if (it != segments_.begin()) --it;
  while (it != segments_.end()) {
    const auto next = std::next(it);
    if (next == segments_.end() || it->first > hi) break;
    if (it->second.end == next->first && it->second.entries == next->second.entries) {
      it->second.end = next->second.end;
      segments_.erase(next);
    } else {
      it = next;
    }
  }
}

void HazardTracker::record(const std::shared_ptr<const OpRecord>& op, std::span<const Access> accesses,
                           std::uint64_t now) {
  if (op->end_ns <= now) return;  // already over: nothing can race it any more
  prune(now);
  for (const Access& access : accesses) {
    if (access.bytes == 0) continue;
    const std::uintptr_t lo = access.ptr, hi = access.ptr + access.bytes;
    const Entry entry{op, lo, hi, access.write};
    split(lo);
    split(hi);
    std::uintptr_t position = lo;
    auto it = segments_.lower_bound(lo);
    while (position < hi) {
      if (it == segments_.end() || it->first > position) {
        // A gap up to the next segment (or the end of the access): a new segment.
        const std::uintptr_t gap_end = it == segments_.end() ? hi : std::min(hi, it->first);
        it = segments_.emplace_hint(it, position, Segment{gap_end, {entry}});
      } else {
        drop_ended(it->second, now);
        add(it->second, entry);
      }
      position = it->second.end;
      ++it;
    }
    coalesce(lo, hi);
  }
  latest_end_ = std::max(latest_end_, op->end_ns);
}

void HazardTracker::check_invariants() const {
  auto broken = [](std::uintptr_t at, const std::string& rule) {
    throw std::logic_error("sim: hazard ranges: the segment at " + hex(at) + ": " + rule);
  };
  std::uintptr_t previous_end = 0;
  for (const auto& [start, segment] : segments_) {
    if (start >= segment.end) broken(start, "empty or reversed");
    if (start < previous_end) broken(start, "overlaps the one before it");
    previous_end = segment.end;
    if (segment.entries.empty()) broken(start, "holds no access");
    for (std::size_t i = 0; i < segment.entries.size(); ++i) {
      const Entry& entry = segment.entries[i];
      if (!entry.op) broken(start, "an access without its operation");
      if (entry.lo > start || entry.hi < segment.end) broken(start, "an access that does not cover the segment");
      if (entry.op->end_ns > latest_end_) broken(start, "an access ending after the latest end known");
      if (i > 0) {
        const Entry& before = segment.entries[i - 1];
        if (std::make_tuple(before.op->queue, before.write) >= std::make_tuple(entry.op->queue, entry.write)) {
          broken(start, "accesses not sorted by queue and kind, or two of one queue and kind");
        }
      }
    }
  }
}

}  // namespace delta::sim
