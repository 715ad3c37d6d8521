// A device that only keeps the books: what the caching allocator asks of memory (address
// reservations, physical handles counted against a capacity, maps and unmaps), nothing else.
// The planner's allocator ledger (allocator_ledger.hpp) replays thousands of plans a second
// through the real allocator; on the sim device its page-by-page maps, each checked against
// hazards and kept in ordered tables, were most of the ledger's time. Here each costs a hash
// lookup. It still refuses what a driver would (a map over a mapping, an unmap of nothing, a
// handle released twice, memory past the capacity), so an allocator bug fails here too.
// Streams and events exist as names. Without a clock nothing runs on this device, so every
// event has completed; with the simulation's clock (LedgerClock) an event completes when the
// work queued before it does, and a wait for it holds the host until then, as the allocator's
// waits hold a program's host (a reclaimed page's idle fence: docs/allocator.md, step 4).
// Copies, memsets and pinned memory are refused.
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace delta::planner {

// The simulation's two clocks, as the ledger device sees them, in ns of the simulated step.
class LedgerClock {
 public:
  virtual ~LedgerClock() = default;
  virtual std::int64_t device_done_ns() const = 0;  // when the work queued so far completes
  virtual std::int64_t host_ns() const = 0;         // where the host has got to
  virtual void host_waits_until(std::int64_t t) = 0;
};

// Where the device finds the clock, which its owner sets (AllocatorLedger::set_clock). Each
// setting starts a generation: events recorded under an earlier one belong to a step already
// over, so they have completed.
struct LedgerClockSlot {
  LedgerClock* clock = nullptr;
  std::uint64_t generation = 0;
  void set(LedgerClock* c) {
    clock = c;
    ++generation;
  }
};

// `clock` (optional) must outlive the device.
std::shared_ptr<Device> make_ledger_device(const std::string& gpu_profile, const LedgerClockSlot* clock = nullptr);

}  // namespace delta::planner
