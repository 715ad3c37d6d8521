// Optional: replays the simulator's allocations through the real delta::CachingAllocator on a
// device that keeps only its books (sim/ledger_device.hpp), so that a plan is judged with
// fragmentation.
#pragma once

#include "sim/ledger_device.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

namespace delta::planner {

class AllocatorLedger {
 public:
  virtual ~AllocatorLedger() = default;
  // `key` names the allocation: a block index, or scratch_key() of one for a replay's output
  // that cannot overwrite the resident block. Throws std::runtime_error with the allocator's
  // message when it does not fit. keep_cache: short of pages, refuse at once rather than flush
  // the allocator's bins first (its OOM path; WhenShort::fail), as the executor asks while it
  // has evictions in flight.
  virtual void allocate(std::uint64_t key, std::uint64_t bytes, bool keep_cache = false) = 0;
  virtual void release(std::uint64_t key) = 0;
  // Executor placement (SimulationOptions::executor_placement): a key marked moved is placed
  // on pages of its own, or with packed_moves in the packed pool beside other moved blocks
  // (Placement::packed: no ordinary block on its pages; a page two moved blocks share is mapped
  // while either is present); evict() takes its last `bytes` (rounded up to whole pages, as the
  // plan's partial swaps are) away and
  // allocate() of it while pages are unmapped maps them back at the same address.
  virtual void mark_moved(std::uint64_t key, std::uint8_t group = 0) = 0;
  virtual bool evict(std::uint64_t key, std::uint64_t bytes) = 0;  // false: not moved, nothing done
  virtual std::uint64_t reserved() const = 0;  // mapped now
  // Of what is mapped, the pages no allocation uses (cached idle pages): the allocator takes
  // them for its next mapping, so they are room the plan may count on.
  virtual std::uint64_t unused() const = 0;
  virtual std::uint64_t reserved_peak() const = 0;
  // The step ends and the same step begins again, as a training loop runs it: the keys in
  // `kept` (blocks live across the boundary: parameters, optimizer state) stay where they are,
  // mapped whole (nothing stays away across a boundary); every other key is released, as the
  // program frees what the step carried to its end. Segments the step left cached stay
  // cached, so the next step is placed among the pieces this one left, as in a run. The next
  // allocate() of a kept key finds it in place. Throws std::logic_error for a kept key not
  // allocated.
  virtual void next_step(std::span<const std::uint64_t> kept) = 0;
  // Throws std::logic_error naming the broken rule: the allocator's own invariants, and the
  // ledger's keys, holes and kept keys against what the allocator holds.
  virtual void check_invariants() const = 0;
  // The simulation's clocks (ledger_device.hpp), so that the allocator's waits for the device
  // hold the simulated host; nullptr: none, every event complete. Cleared before the clock goes.
  virtual void set_clock(LedgerClock* clock) = 0;
};

// Allocates through the ledger; while the allocator has no room, calls make_room with its
// message and tries again. make_room frees something (or waits until something is freed), or
// throws its own error when nothing more can be.
template <typename MakeRoom>
void allocate_making_room(AllocatorLedger& ledger, std::uint64_t key, std::uint64_t bytes, MakeRoom&& make_room) {
  for (;;) {
    std::string refused;
    try {
      ledger.allocate(key, bytes);
      return;
    } catch (const std::runtime_error& e) {
      refused = e.what();
    }
    make_room(refused);
  }
}

inline std::uint64_t scratch_key(std::uint32_t block) { return (std::uint64_t{1} << 32) | block; }

// nullptr when this build has no allocator (the simulator then says so).
// packed_moves: the keys marked moved are packed side by side (Placement::packed) rather than
// each on whole pages of its own.
std::unique_ptr<AllocatorLedger> make_allocator_ledger(const std::string& gpu_profile, std::uint64_t budget_bytes,
                                                       bool packed_moves = false);

}  // namespace delta::planner
