// The simulator's replay of a plan (simulate(), simulator.hpp), private to sim/: the state of
// every block as the plan runs, the plan's events scheduled per op, and the Replay class whose
// parts the replay*.cpp files define.
#pragma once

#include "sim/allocator_ledger.hpp"
#include "sim/simulator.hpp"
#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace delta::planner::simulation {

// 32 bytes, two to a cache line: every op reads the state of each block it uses, scattered
// over all blocks, and on large traces those reads miss the cache more than anything else.
struct BlockState {
  bool resident = false;     // the data is (or is being made) available on the device
  bool held = false;         // its bytes are allocated
  bool host_valid = false;   // a host copy equal to the device data exists
  bool evicting = false;     // a D2H copy is in flight; bytes held until it completes
  std::uint32_t evict_seq = 0;
  std::int64_t ready_ns = 0;
  std::int64_t copied_ns = 0;  // host_valid: when the copy to host completes (or completed)
  std::int32_t released_after = -1;  // for messages
};
static_assert(sizeof(BlockState) == 32);

struct PendingEviction {
  std::int64_t done_ns;
  std::uint32_t block;
  std::uint32_t seq;
  std::uint64_t bytes;  // what the copy frees: the block's size, or less for a partial swap
  bool operator>(const PendingEviction& other) const { return done_ns > other.done_ns; }
};

struct Scheduled {
  std::uint32_t block;
  const plan::Interval* interval;
};

// What the plan schedules at each op, in plan order, packed in one array (one simulation per
// candidate plan: a vector per op would cost an allocation each).
class OpSchedule {
 public:
  explicit OpSchedule(std::size_t slots) : slots_(slots) {}
  void add(std::size_t op, Scheduled item) { pending_.push_back({static_cast<std::uint32_t>(op), item}); }
  void pack() {
    start_.assign(slots_ + 1, 0);
    for (const auto& [op, item] : pending_) ++start_[op + 1];
    for (std::size_t i = 0; i < slots_; ++i) start_[i + 1] += start_[i];
    items_.resize(pending_.size());
    std::vector<std::uint32_t> next(start_.begin(), start_.end() - 1);
    for (const auto& [op, item] : pending_) items_[next[op]++] = item;
    pending_.clear();
    pending_.shrink_to_fit();
  }
  std::span<const Scheduled> at(std::size_t op) const { return {items_.data() + start_[op], items_.data() + start_[op + 1]}; }
  // Orders each op's items by `before`, ties as added (after pack()).
  template <typename Before>
  void order_each(Before before) {
    for (std::size_t i = 0; i < slots_; ++i)
      if (start_[i + 1] - start_[i] > 1) std::stable_sort(items_.begin() + start_[i], items_.begin() + start_[i + 1], before);
  }

 private:
  std::size_t slots_;
  std::vector<std::pair<std::uint32_t, Scheduled>> pending_;
  std::vector<std::uint32_t> start_;
  std::vector<Scheduled> items_;
};

class Infeasible : public std::runtime_error {
 public:
  Infeasible(std::int64_t op, const std::string& what, std::uint64_t shortfall = 0)
      : std::runtime_error(what), op(op), shortfall(shortfall) {}
  std::int64_t op;
  std::uint64_t shortfall;
};

// The replay of one plan on one trace, op by op: the class behind simulate(). Its parts, each
// in a file of its own:
//   replay_checks.cpp         the plan checked against the trace and scheduled op by op;
//   replay.cpp                the step op by op: memory held, copies out and back, the ops;
//   replay_regenerations.cpp  the replays that rebuild blocks before an op.
// Members declared inline are on the hot path: each is defined, and called, in its one file
// alone, so that the compiler inlines it there.
class Replay {
 public:
  // Checks the plan against the trace (Infeasible naming the first problem) and schedules it.
  // Through the allocator, `ledger` is the allocator a step before this one left
  // (AllocatorLedger::next_step); null: an empty one.
  Replay(const TraceIndex& index, const plan::Plan& plan, const SimulationOptions& options,
         std::unique_ptr<AllocatorLedger> ledger = nullptr);
  Replay(const Replay&) = delete;  // its ledger's clock points back at it
  Replay& operator=(const Replay&) = delete;
  SimulationResult run();
  // The allocator as the step left it, for the next one (null when not through the allocator).
  std::unique_ptr<AllocatorLedger> take_ledger() {
    if (ledger_) ledger_->set_clock(nullptr);
    return std::move(ledger_);
  }

 private:
  // --- replay_checks.cpp ---
  // A revival rebuilds a block the program has freed, for replays only: it must come after
  // that free, hold until an op of the step, and replay ops that have run by then.
  void check_revival(std::uint32_t b, const plan::Interval& interval) const;
  // A swap whose copy starts before its release: the data must be final by then (no write
  // in between) and the block on the device.
  void schedule_early_copy(std::uint32_t b, const plan::Interval& interval);

  // --- replay.cpp: memory ---
  // Makes all of block b held: allocates it, or the part a partial swap freed.
  void hold(std::uint32_t b, std::size_t op);
  void unhold(std::uint32_t b) {
    stop_holding(b);
    if (ledger_) ledger_->release(b);
  }
  // The block leaves the device whole but stays the program's (an eviction, a drop). Under
  // executor placement a moved block keeps its address, its pages unmapped; else as unhold().
  void evict(std::uint32_t b) {
    if (!ledger_ || !options_.executor_placement || !ledger_->evict(b, index_.size(b))) return unhold(b);
    stop_holding(b);
  }
  // The accounting of a block no longer held, wherever its memory goes.
  void stop_holding(std::uint32_t b) {
    BlockState& s = state_[b];
    s.held = false;
    s.evicting = false;
    held_ -= index_.size(b) - away(b);
    if (!away_.empty()) away_[b] = 0;
  }
  // The program frees it (or a retention expires): its memory goes back, pages away or not.
  void forget(std::uint32_t b) {
    if (state_[b].held) unhold(b);
    else if (ledger_) ledger_->release(b);
  }
  // A partial swap's copy is done: its pages are freed, the rest of the block stays. Through
  // the allocator, the block is placed again at its remaining size: the freed space always
  // holds it.
  void unhold_part(std::uint32_t b, std::uint64_t bytes);
  inline void free_evicted(std::uint32_t b, std::uint64_t bytes);
  // Frees the blocks whose copies out have completed by now.
  void reclaim();
  // Forgets pending evictions whose block came back before its copy out finished (a prefetch
  // cancelled them): waiting for one frees nothing.
  void drop_stale_evictions();
  // Waits for pending evictions until `bytes` more fit in the budget.
  void make_room(std::uint64_t bytes, std::size_t op);
  // The bytes block b lacks on the device: all of it, or what a partial swap took away.
  std::uint64_t missing(std::uint32_t b) const { return state_[b].held ? away(b) : index_.size(b); }
  std::uint64_t away(std::uint32_t b) const { return away_.empty() ? 0 : away_[b]; }
  // Places an allocation through the caching allocator, when simulating through it. As a
  // runtime meeting an out-of-memory with copies out still in flight would, it waits for the
  // next eviction to complete (which frees its block) and tries again: the live budget can be
  // filled by blocks still being copied out, and their memory is only briefly unusable. The
  // allocation is refused only when nothing pending can make room. As the executor places
  // blocks, the allocator flushes its bins (its OOM path) only when no eviction is in flight:
  // the executor, whose host runs ahead, cannot tell which evictions the device has completed
  // by a given op, but it can wait for all of them; so both flush at the same points, and small
  // blocks go where the plan was fitted with (the DTR transformer at 0.3 ran 5.4% over its
  // budget, densenet121 at 0.5 0.09%, when they flushed at different points).
  template <typename Name>
  void place(std::uint64_t key, std::uint64_t bytes, std::size_t op, Name&& name) {
    if (!ledger_) return;
    const auto wait_for_eviction = [&] {
      drop_stale_evictions();
      if (pending_.empty()) return false;
      const std::int64_t done = pending_.top().done_ns;
      if (done > now_) {
        stall_ += done - now_;
        now_ = done;
      }
      host_waits_until(now_);
      reclaim();
      return true;
    };
    if (options_.executor_placement) {
      for (;;) {
        try {
          ledger_->allocate(key, bytes, /*keep_cache=*/true);
          return;
        } catch (const std::runtime_error&) {
        }
        if (!wait_for_eviction()) break;
      }
    }
    allocate_making_room(*ledger_, key, bytes, [&](const std::string& refused) {
      if (!wait_for_eviction()) throw Infeasible(static_cast<std::int64_t>(op), op_name(op) + ": " + name() + ": " + refused, bytes);
    });
  }

  // --- replay.cpp: copies and ops ---
  void issue_prefetches(std::size_t i);
  inline void run_op(std::size_t i);
  inline void release_after(std::size_t i);
  // When an op of `duration` whose inputs are ready at `ready` starts and ends: no earlier
  // than the host issues it. Advances the clocks; the wait for inputs counts as a stall, the
  // wait for the host does not (the program without a plan waits for it alike).
  void start_op(std::int64_t ready, std::int64_t duration) {
    host_ns_ += launch_ns_;
    const std::int64_t paced = std::max(now_, host_ns_);
    if (ready > paced) stall_ += ready - paced;
    now_ = std::max(paced, ready) + duration;
  }
  // The host waited (for room, until `t`): it issues nothing before.
  void host_waits_until(std::int64_t t) { host_ns_ = std::max(host_ns_, t); }
  // A discard under SimulationOptions::discard_copies: copied to host unless a current copy
  // is there, its bytes freed when the copy completes.
  inline void discard_with_copy(std::uint32_t b);
  // Whether the host holds an up-to-date copy of at least `bytes` of block b.
  inline bool host_covers(std::uint32_t b, std::uint64_t bytes) const;
  // Queues the copy of `size` bytes of block b to host on the D2H lane, behind what is queued there.
  inline void copy_to_host(std::uint32_t b, std::uint64_t size);
  inline void start_early_copies(std::size_t i);
  std::string op_name(std::size_t i) const;

  // --- replay_regenerations.cpp ---
  // Runs the replays due before op i on the compute stream, in replay_order(). Data are
  // versioned: a replayed op must read every block as it was when the op first ran (the
  // number of writes before it), and a rebuilt block must end as it is now. Blocks a replay
  // writes that are not resident are allocated; the targets stay, the others are freed after
  // their last read in the sequence. Outputs that would overwrite resident data go to scratch
  // memory, held until their last read.
  void run_regenerations(std::size_t i);

  const TraceIndex& index_;
  const SimulationOptions& options_;
  std::vector<BlockState> state_;
  std::vector<std::uint8_t> retained_;  // per block: the plan keeps it past the program's free
  // Only for plans with partial swaps (else empty), per block: the bytes a partial swap has
  // freed while the rest stays held, and the bytes the host copy holds.
  bool has_partial_swaps_ = false;
  std::vector<std::uint64_t> away_, host_bytes_;
  std::vector<CopyMoment> copies_made_;  // record_timeline only
  OpSchedule releases_, copies_, expiries_, prefetches_, regenerations_;
  std::priority_queue<PendingEviction, std::vector<PendingEviction>, std::greater<>> pending_;
  // The clocks the ledger's device reads: the allocator's waits for the device (a reclaimed
  // page's idle fence) hold the host, as in a run. Declared before the ledger, which uses it
  // until it goes.
  struct Clock final : LedgerClock {
    Replay* replay;
    explicit Clock(Replay* r) : replay(r) {}
    std::int64_t device_done_ns() const override { return replay->now_; }
    std::int64_t host_ns() const override { return replay->host_ns_; }
    void host_waits_until(std::int64_t t) override { replay->host_waits_until(t); }
  } clock_{this};
  std::unique_ptr<AllocatorLedger> ledger_;
  struct SequenceSlot {  // per block, for the replays before one op (stamped with round_)
    std::uint64_t read_round = 0, rebuilt_round = 0, scratch_round = 0;
    std::size_t last_read = 0;
    std::uint32_t version = 0;
  };
  std::vector<SequenceSlot> seq_;
  // run_regenerations' buffers, kept from one op to the next.
  ReplayOrder replay_order_;
  std::vector<const plan::Interval*> regen_intervals_;
  std::vector<std::uint32_t> regen_targets_, regen_temporaries_;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> regen_scratch_;
  std::uint64_t round_ = 0;
  std::int64_t now_ = 0, h2d_free_ = 0, d2h_free_ = 0, stall_ = 0, extra_ = 0;
  // Host pace (SimulationOptions::host_pace): what issuing one op costs the host (0: off), and
  // when the host issued the last one. Between ops host_ns_ <= now_: the host runs ahead by
  // what the kernels are longer than its cost, and falls behind where they are shorter.
  std::int64_t launch_ns_ = 0, host_ns_ = 0;
  std::uint64_t partial_swaps_ = 0;  // run so far
  std::uint64_t held_ = 0, peak_ = 0, moment_peak_ = 0, h2d_bytes_ = 0, d2h_bytes_ = 0, swaps_ = 0, regenerations_count_ = 0, revivals_ = 0, discards_ = 0;
};

}  // namespace delta::planner::simulation
