// The sim's hazard checker. The sim applies an operation's effect on content when it is issued,
// in host order; that is only what a GPU would compute if every two operations that touch the
// same bytes (and one of them writes) are ordered in virtual time. This class keeps the
// accesses of the operations still in flight and refuses, with DeviceErrc::hazard, any new
// access that a real GPU would race with:
//   - a device operation that starts before an earlier-issued operation of another stream,
//     overlapping it in address, has ended (read-after-write, write-after-read,
//     write-after-write; two reads never conflict);
//   - a host access at host time `now` (read, digest, write, unmap, release) of bytes that an
//     operation in flight writes, or, when the host writes or takes the memory away, accesses.
// Operations of one queue (one stream) run in order and never conflict. Ordering through events
// shows up as start times, so comparing times is exact in this deterministic sim.
//
// Structure: an interval map from address to disjoint segments; each segment keeps, per queue
// and kind of access, only the access that ends last (a queue's operations end in issue order,
// so it stands for all of them). Its size is bounded by the streams times the distinct range
// boundaries in flight, not by the number of operations. Accesses that ended by host time
// `now` are dropped as they are met, all at once when nothing is left in flight, and by a
// sweep whenever the map has doubled since the last one.
//
// Not thread-safe on its own: the sim device serialises every call with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace delta::sim {

// One issued operation, as hazard messages name it.
struct OpRecord {
  std::string what;          // "launch of kernel 'gemm'", "copy_h2d_async", ...
  std::string stream;        // the stream's label (SimClock::identity)
  std::uint64_t queue = 0;   // the stream's queue (SimClock::identity)
  std::uint64_t issued_ns = 0, start_ns = 0, end_ns = 0;
};

// An address range an operation reads or writes (device addresses, or pinned host addresses:
// the two never alias, see kVaBase).
struct Access {
  std::uintptr_t ptr = 0;
  std::size_t bytes = 0;
  bool write = false;
};

class HazardTracker {
 public:
  // Throws DeviceError(hazard) when `op`, not yet recorded, races a recorded access; `now` is
  // the host time (op.start_ns >= now).
  void check_op(const OpRecord& op, std::span<const Access> accesses, std::uint64_t now);
  // Remembers the accesses of an issued operation until it ends.
  void record(const std::shared_ptr<const OpRecord>& op, std::span<const Access> accesses, std::uint64_t now);
  // Throws DeviceError(hazard) when the host's `operation` at time `now` on [ptr, ptr + bytes)
  // meets an operation in flight that writes the range or, with `host_writes`, touches it.
  // The message names it as operation(ptr, bytes), formatted only then: the allocator ledger
  // the planner judges plans with unmaps pages millions of times.
  void check_host(const char* operation, std::uintptr_t ptr, std::size_t bytes, bool host_writes, std::uint64_t now);

  std::size_t ranges() const { return segments_.size(); }
  // Segments sorted, non-empty, disjoint; entries sorted, unique per queue and kind, each
  // covering its segment. Throws std::logic_error naming the first broken rule.
  void check_invariants() const;

 private:
  struct Entry {
    std::shared_ptr<const OpRecord> op;
    std::uintptr_t lo = 0, hi = 0;  // the whole access, for messages
    bool write = false;
    bool operator==(const Entry& other) const {
      return op == other.op && lo == other.lo && hi == other.hi && write == other.write;
    }
  };
  struct Segment {
    std::uintptr_t end = 0;
    std::vector<Entry> entries;  // sorted by (queue, write)
  };
  using Map = std::map<std::uintptr_t, Segment>;

  // Drops what ended by `now`: everything when nothing is left in flight, otherwise the whole
  // map when it has doubled since the last sweep.
  void prune(std::uint64_t now);
  static void drop_ended(Segment& segment, std::uint64_t now);
  // The first segment that overlaps [lo, ...), or end().
  Map::iterator first_overlapping(std::uintptr_t lo);
  // Cuts the segment containing `at` there.
  void split(std::uintptr_t at);
  void add(Segment& segment, const Entry& entry);
  // Joins equal neighbours from the segment before `lo` to the one starting at `hi`.
  void coalesce(std::uintptr_t lo, std::uintptr_t hi);

  Map segments_;
  std::uint64_t latest_end_ = 0;   // when every recorded operation has ended
  std::size_t sweep_above_ = 64;   // sweep the whole map once it holds more segments
};

}  // namespace delta::sim
