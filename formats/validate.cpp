// validate(): the promises of the format that a reader cannot see field by field.
#include <delta/trace.hpp>

#include "format_rules.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace delta::trace {
namespace {

using format::kMaxBlockBytes;
using format::kMaxTimeNs;

[[noreturn]] void fail(const std::string& place, const std::string& problem) {
  throw TraceError(place + ": " + problem);
}

std::string at(const char* array, std::size_t index) {
  return std::string(array) + "[" + std::to_string(index) + "]";
}

constexpr std::uint64_t kMaxTotalBytes = std::uint64_t{1} << 62;  // sums of live bytes stay signed-safe

bool time_in_range(std::int64_t t) { return t >= 0 && t <= kMaxTimeNs; }
bool optional_time_in_range(std::int64_t t) { return t == kNever || time_in_range(t); }

void check_blocks(const Trace& trace) {
  std::uint64_t total_bytes = 0;  // every block's bytes: what any sum of live bytes stays under
  for (std::size_t i = 0; i < trace.blocks.size(); ++i) {
    const Block& block = trace.blocks[i];
    const std::string place = at("blocks", i);
    if (i > 0 && block.id <= trace.blocks[i - 1].id) {
      fail(place, "id " + std::to_string(block.id) + " does not follow id " +
                      std::to_string(trace.blocks[i - 1].id) +
                      " (blocks must be sorted by id, ids unique)");
    }
    if (block.size == 0 || block.size > kMaxBlockBytes) {
      fail(place + ".size", "size " + std::to_string(block.size) + " is outside 1 B .. 256 TiB");
    }
    if (block.size <= kMaxBlockBytes) {
      total_bytes += block.size;
      if (total_bytes > kMaxTotalBytes) fail(place + ".size", "the blocks' sizes up to here sum past 2^62 bytes");
    }
    if (block.address > UINT64_MAX - block.size) {
      fail(place + ".address", "address + size overflows 64 bits");
    }
    if (block.stream > format::kMaxStream) fail(place + ".stream", "stream id above 2^53");
    if (!optional_time_in_range(block.alloc_ns)) {
      fail(place + ".alloc_ns", "time " + std::to_string(block.alloc_ns) + " is neither -1 nor in 0 .. 2^62");
    }
    if (!optional_time_in_range(block.free_ns)) {
      fail(place + ".free_ns", "time " + std::to_string(block.free_ns) + " is neither -1 nor in 0 .. 2^62");
    }
    if (block.alloc_ns != kNever && block.free_ns != kNever && block.free_ns < block.alloc_ns) {
      fail(place + ".free_ns", "block " + std::to_string(block.id) + " freed at " +
                                   std::to_string(block.free_ns) + " ns, before its allocation at " +
                                   std::to_string(block.alloc_ns) + " ns");
    }
    if (static_cast<int>(block.category) >= format::kCategoryCount) {
      fail(place + ".category", "unknown category code " + std::to_string(static_cast<int>(block.category)));
    }
  }
}

// Two blocks with known addresses may share bytes only if their lifetimes do not overlap. A
// sweep over lifetimes keeps the live address ranges ordered; each new range is checked
// against its neighbours. Frees at time t happen before allocations at t (reuse at once is fine).
void check_address_overlaps(const Trace& trace) {
  struct Event {
    std::int64_t time;
    int order;  // 0 = free, 1 = alloc: frees first at equal times
    std::size_t block;
  };
  std::vector<Event> events;
  for (std::size_t i = 0; i < trace.blocks.size(); ++i) {
    const Block& block = trace.blocks[i];
    // Address 0: not known. A block freed the instant it is allocated occupies no time.
    if (block.address == 0 || (block.free_ns != kNever && block.free_ns == block.alloc_ns)) continue;
    // Live before the trace: allocated at "minus infinity"; never freed: free never happens.
    events.push_back({block.alloc_ns == kNever ? INT64_MIN : block.alloc_ns, 1, i});
    if (block.free_ns != kNever) events.push_back({block.free_ns, 0, i});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.time, a.order, a.block) < std::tie(b.time, b.order, b.block);
  });
  std::map<std::uint64_t, std::size_t> live;  // start address -> block index
  for (const Event& event : events) {
    const Block& block = trace.blocks[event.block];
    if (event.order == 0) {
      if (auto it = live.find(block.address); it != live.end() && it->second == event.block) live.erase(it);
      continue;
    }
    auto next = live.lower_bound(block.address);
    auto report = [&](std::size_t other_index) {
      const Block& other = trace.blocks[other_index];
      fail(at("blocks", event.block) + ".address",
           "block " + std::to_string(block.id) + " at " + std::to_string(block.address) + " (+" +
               std::to_string(block.size) + " B) overlaps block " + std::to_string(other.id) + " at " +
               std::to_string(other.address) + " (+" + std::to_string(other.size) +
               " B) while both are live");
    };
    if (next != live.end() && next->first < block.address + block.size) report(next->second);
    if (next != live.begin()) {
      auto previous = std::prev(next);
      const Block& other = trace.blocks[previous->second];
      if (other.address + other.size > block.address) report(previous->second);
    }
    live.emplace(block.address, event.block);
  }
}

const Block* find_block(const Trace& trace, std::uint64_t id) {
  auto it = std::lower_bound(trace.blocks.begin(), trace.blocks.end(), id,
                             [](const Block& block, std::uint64_t wanted) { return block.id < wanted; });
  return it != trace.blocks.end() && it->id == id ? &*it : nullptr;
}

void check_ops(const Trace& trace) {
  std::unordered_set<std::uint64_t> op_ids;
  op_ids.reserve(trace.ops.size());
  std::vector<std::pair<std::uint64_t, int>> uses;
  std::int64_t total_ns = 0;  // every op's time, summed as the planner and the simulator sum it
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const Op& op = trace.ops[i];
    const std::string place = at("ops", i);
    if (!op_ids.insert(op.id).second) fail(place + ".id", "op id " + std::to_string(op.id) + " is used twice");
    if (static_cast<int>(op.kind) >= format::kOpKindCount) {
      fail(place + ".kind", "unknown op kind code " + std::to_string(static_cast<int>(op.kind)));
    }
    if (static_cast<int>(op.phase) >= format::kPhaseCount) {
      fail(place + ".phase", "unknown phase code " + std::to_string(static_cast<int>(op.phase)));
    }
    if (op.stream > format::kMaxStream) fail(place + ".stream", "stream id above 2^53");
    if (!time_in_range(op.start_ns)) {
      fail(place + ".start_ns", "time " + std::to_string(op.start_ns) + " is outside 0 .. 2^62");
    }
    if (!time_in_range(op.duration_ns)) {
      fail(place + ".duration_ns", "duration " + std::to_string(op.duration_ns) + " is outside 0 .. 2^62");
    }
    // Each in range, they may still sum past it: a step's time, and every time derived from it,
    // would wrap.
    if (time_in_range(op.duration_ns) && op.duration_ns > kMaxTimeNs - total_ns)
      fail(place + ".duration_ns", "the ops' durations up to here sum past 2^62 ns");
    total_ns += op.duration_ns;
    if (!std::isfinite(op.flops) || op.flops < 0) fail(place + ".flops", "flops must be finite and not negative");
    if (i > 0) {
      const Op& previous = trace.ops[i - 1];
      if (std::tie(op.start_ns, op.id) < std::tie(previous.start_ns, previous.id)) {
        fail(place + ".start_ns", "op " + std::to_string(op.id) + " starts at " + std::to_string(op.start_ns) +
                                      " ns, before the previous op " + std::to_string(previous.id) + " at " +
                                      std::to_string(previous.start_ns) +
                                      " ns (ops must be sorted by start_ns, then id)");
      }
    }
    uses.clear();
    for (std::size_t u = 0; u < op.blocks.size(); ++u) {
      const BlockUse& use = op.blocks[u];
      const std::string use_place = place + ".blocks[" + std::to_string(u) + "]";
      if (static_cast<int>(use.access) >= format::kAccessCount) {
        fail(use_place, "unknown access code " + std::to_string(static_cast<int>(use.access)));
      }
      const Block* block = find_block(trace, use.block);
      if (block == nullptr) fail(use_place, "unknown block " + std::to_string(use.block));
      if (block->alloc_ns != kNever && op.start_ns < block->alloc_ns) {
        fail(use_place, "op starts at " + std::to_string(op.start_ns) + " ns, before block " +
                            std::to_string(use.block) + " is allocated at " + std::to_string(block->alloc_ns) +
                            " ns");
      }
      uses.emplace_back(use.block, static_cast<int>(use.access));
    }
    std::sort(uses.begin(), uses.end());
    auto duplicate = std::adjacent_find(uses.begin(), uses.end());
    if (duplicate != uses.end()) {
      fail(place + ".blocks", "block " + std::to_string(duplicate->first) + " is listed twice as " +
                                  to_string(static_cast<Access>(duplicate->second)));
    }
  }
}

void check_iterations(const Trace& trace) {
  std::uint64_t previous_end = 0;
  for (std::size_t i = 0; i < trace.iterations.size(); ++i) {
    const Iteration& iteration = trace.iterations[i];
    const std::string place = at("iterations", i);
    if (iteration.index != i) fail(place + ".index", "index " + std::to_string(iteration.index) + ", expected " + std::to_string(i));
    if (!time_in_range(iteration.start_ns) || !time_in_range(iteration.end_ns) ||
        iteration.end_ns < iteration.start_ns) {
      fail(place, "times " + std::to_string(iteration.start_ns) + " .. " + std::to_string(iteration.end_ns) +
                      " ns are not an interval inside 0 .. 2^62");
    }
    if (iteration.first_op > iteration.end_op || iteration.end_op > trace.ops.size()) {
      fail(place, "ops " + std::to_string(iteration.first_op) + " .. " + std::to_string(iteration.end_op) +
                      " are not a range inside the " + std::to_string(trace.ops.size()) + " ops");
    }
    if (iteration.first_op < previous_end) {
      fail(place + ".first_op", "iteration starts at op " + std::to_string(iteration.first_op) +
                                    ", inside the previous iteration (which ends at op " +
                                    std::to_string(previous_end) + ")");
    }
    previous_end = iteration.end_op;
    for (std::uint64_t op = iteration.first_op; op < iteration.end_op; ++op) {
      if (trace.ops[op].iteration != iteration.index) {
        fail(at("ops", op) + ".iteration", "op says iteration " + std::to_string(trace.ops[op].iteration) +
                                               " but lies in iteration " + std::to_string(iteration.index));
      }
    }
  }
}

}  // namespace

void validate(const Trace& trace) {
  if (trace.version != kFormatVersion) {
    throw TraceError("version: " + std::to_string(trace.version) + " is not supported (this reader reads version " +
                     std::to_string(kFormatVersion) + ")");
  }
  check_blocks(trace);
  check_address_overlaps(trace);
  check_ops(trace);
  check_iterations(trace);
}

}  // namespace delta::trace
