// The offline rematerialisation's planner, private to delta/remat/: the class behind
// plan_offline_remat (remat.hpp), whose parts the files of this folder define.
#pragma once

#include "common/plan_edits.hpp"
#include "common/request.hpp"
#include "delta/remat/remat.hpp"
#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

namespace delta::planner::remat {

constexpr std::uint32_t kForever = std::numeric_limits<std::uint32_t>::max();

enum class State : std::uint8_t { dead, resident, dropped };

// The offline rematerialisation of one step (plan_offline_remat, remat.hpp). Its parts, each in
// a file of its own:
//   offline_remat.cpp   the step op by op: restore what an op uses, drop what must go, and plan
//                       again with what stranded an op pinned;
//   rebuild_limits.cpp  which version of which block can be rebuilt by replay, until when, at
//                       what compute;
//   rebuilds.cpp        rebuilding a dropped block before an op: its chain of replays, what
//                       that chain needs, revivals and siblings;
//   drops.cpp           which resident blocks to drop when an op does not fit.
// Members declared inline are on the hot path: each is defined, and called, in its one file
// alone, so that the compiler inlines it there.
class OfflineRemat {
 public:
  OfflineRemat(const PlanRequest& request, const RematOptions& options);
  // Greedy drops can strand an op: a block dropped long before turns out to need a rebuild
  // whose temporaries do not fit. Then the blocks that op needed are pinned (not dropped
  // before it) and the step is planned again, a bounded number of times.
  plan::Plan run();
  // --- resident_floor.cpp ---
  // The most bytes resident at one op under any plan it makes: the blocks it can never drop
  // there beside what the op uses. Made with the longest rebuild limits (discard_dead off),
  // it holds for every setting.
  std::uint64_t resident_floor_peak() const;

 private:
  // --- offline_remat.cpp: the step op by op ---
  void reset();
  // Pins what op j needed when it failed: first the blocks it reads itself, and when those
  // are pinned already, the inputs its replays restored. False when nothing new is pinned.
  bool pin_for(std::uint32_t j);
  // Op j under the budget: restore what it uses, then drop what must go. When that fails with
  // restored replay inputs kept resident, try again rebuilding them as temporaries instead.
  inline bool step(std::uint32_t j);
  // Undoes the restorations of a failed attempt at op j (drops it made stay: they were
  // released after op j - 1 and will be restored where needed).
  void roll_back(std::uint32_t j);
  bool attempt(std::uint32_t j);
  // Moves the per-block counts (writes and uses before the op) up to op j.
  inline void advance_to(std::uint32_t j);
  // Most bytes the replays before op j hold at once besides their targets: what they write
  // that is not a target (a temporary, or scratch for resident data), from its write to its
  // last read in the sequence the simulator runs.
  inline std::int64_t replay_peak(std::uint32_t j);

  // The room at op j (RematOptions::budget_by_op).
  std::int64_t budget_at(std::uint32_t j) const {
    const std::vector<std::uint64_t>& by_op = options_.budget_by_op;
    const std::uint64_t budget = by_op.empty() ? request_.budget_bytes : by_op[std::min<std::size_t>(j, by_op.size() - 1)];
    return static_cast<std::int64_t>(std::min<std::uint64_t>(budget, std::numeric_limits<std::int64_t>::max()));
  }

  // --- rebuild_limits.cpp ---
  // For every version of every block (its data after k writes), whether it can be rebuilt by
  // replaying its version chain, the compute that costs, and the last op before which that
  // works: nothing the chain reads may change in between, inputs that cannot be rebuilt must
  // still be allocated, and the version must not have been overwritten. Versions are filled
  // in trace order, so the limits of a chain's inputs are known when it is reached.
  void compute_rebuild_limits();
  // Whether some version of the block can be rebuilt (it may then be dropped).
  bool rebuildable_block(std::uint32_t b) const {
    for (std::size_t slot = version_base_[b]; slot < version_base_[b + 1]; ++slot)
      if (version_ok_[slot]) return true;
    return false;
  }

  // --- rebuilds.cpp ---
  // Rebuilds dropped block `b` just before op j as its own regeneration interval.
  bool restore(std::uint32_t b, std::uint32_t j);
  // The replays before op j also write other dropped blocks (a dropout's mask beside its
  // output): those needed soon are kept from the same replay, as targets of their own,
  // rather than replayed again where they are needed.
  bool restore_siblings(std::uint32_t j);
  // True when block b can be restored before op j and stay, besides op j's own allocations,
  // without dropping anything.
  inline bool fits(std::uint32_t b, std::uint32_t j) const;
  // Makes block b resident just before op j as a target of the replays there, replaying its
  // version chain (and what that chain needs) into `interval`, which joins the plan.
  bool rebuild(std::uint32_t b, std::uint32_t j, plan::Interval interval);
  // Appends op p (part of the version chain of block `rebuilding`) to `chain`, preceded by the
  // version chains of what it reads that is gone (freed by the trace) at j; inputs still live
  // but dropped become regenerations of their own.
  bool replay(std::uint32_t p, std::uint32_t rebuilding, std::uint32_t j, std::vector<std::uint64_t>& chain,
              std::vector<std::uint32_t>& inputs);
  // Whether block y, freed by the program before op j, can be rebuilt there as the data
  // (version) a replay reads: its final data, and a chain that still works at j.
  inline bool revivable(std::uint32_t y, std::uint32_t version, std::uint32_t j) const;
  // Rebuilds freed block y just before op j and keeps it for later replays (a revival,
  // ended by end_revival).
  inline bool revive(std::uint32_t y, std::uint32_t j);
  // The block's latest revival in the plan, if its last interval is one.
  inline plan::Interval* last_revival(std::uint32_t y);
  void forget_revival(std::uint32_t y);
  // Frees revived block y after op `until`: its interval ends there.
  void end_revival(std::uint32_t y, std::uint32_t until);
  // Revivals still held at the end of the step end with its last op.
  void end_revivals();

  // --- drops.cpp ---
  // Drops resident blocks (released after op j-1) until `bytes` are free.
  bool make_room(std::int64_t bytes, std::uint32_t j);
  // Estimated compute to rebuild b as its version `slot`: its version chain and, `depth` levels
  // down, the chains of what the chain's last op reads that is not resident.
  double rebuild_cost_of(std::uint32_t b, std::size_t slot, int depth) const;
  // Compute of dropped blocks made from b that are still needed: dropping b as well makes
  // their rebuilds longer (DTR's evicted neighbours, one level down).
  inline double children_cost(std::uint32_t b, std::uint32_t j) const;
  // Dropping `victim` at op j: its resident siblings needed soon after it would come back with
  // its replay for free, so they join the heap at the score of a drop without compute.
  inline void offer_siblings(std::uint32_t victim, std::uint32_t j, std::vector<std::pair<double, std::uint32_t>>& heap);
  // A dropped block written by the same single op as block b, needed before b and within the
  // sibling window of it: b then comes back with that block's replay, at no compute. Returns
  // its next need (kForever: none).
  inline std::uint32_t sibling_need(std::uint32_t b, std::uint32_t j, std::uint32_t need_b) const;
  // The next op at which a dropped block made from revived block y is needed: where a replay
  // may read y again (kForever: none).
  inline std::uint32_t revival_need(std::uint32_t y, std::uint32_t j) const;

  // --- shared by the parts ---
  // Block b resident again, and a candidate to drop where it can be rebuilt.
  void make_resident(std::uint32_t b) {
    state_[b] = State::resident;
    memory_ += static_cast<std::int64_t>(index_.block(b).size);
    if (rebuildable_block(b) && may_move(request_, index_.block(b)) && pool_slot_[b] < 0) {
      pool_slot_[b] = static_cast<std::int64_t>(pool_.size());
      pool_.push_back(b);
    }
  }
  // Block b no longer a candidate to drop.
  void leave_pool(std::uint32_t b) {
    const std::int64_t slot = pool_slot_[b];
    if (slot < 0) return;
    pool_[slot] = pool_.back();
    pool_slot_[pool_[slot]] = slot;
    pool_.pop_back();
    pool_slot_[b] = -1;
  }
  // The last op that uses the block (the op it is allocated at when none does).
  std::uint32_t last_read(std::uint32_t b) const {
    const BlockInfo& info = index_.block(b);
    return info.uses.empty() ? info.first : info.uses.back();
  }
  // The slot of the block's data as op j sees it.
  // At the op the sweep has reached the counts kept as it advances serve without a search.
  std::size_t slot_at(std::uint32_t b, std::uint32_t j) const {
    return version_base_[b] + (j == advanced_to_ ? writes_before_[b] : index_.version_at(b, j));
  }
  bool rebuildable_at(std::uint32_t b, std::uint32_t j) const {
    const std::size_t slot = slot_at(b, j);
    return version_ok_[slot] && j <= version_limit_[slot];
  }
  std::int64_t start_of(std::uint32_t op) const { return op >= n_ ? index_.native_step_ns() : index_.native_start(op); }
  // The next op at or after `from` that uses the block; the end of the step for blocks that
  // outlive it; kForever when it is not needed again.
  std::uint32_t next_need(std::uint32_t b, std::uint32_t from) const {
    const BlockInfo& info = index_.block(b);
    auto it = from == advanced_to_ ? info.uses.begin() + uses_before_[b]
                                   : std::lower_bound(info.uses.begin(), info.uses.end(), from);
    if (it != info.uses.end()) return *it;
    return info.to_end ? static_cast<std::uint32_t>(n_) : kForever;
  }
  bool sibling_on() const { return options_.sibling_window >= 0; }
  std::int64_t sibling_window() const { return std::int64_t(options_.sibling_window * double(index_.native_step_ns())); }
  // The op that wrote block b's data as op j sees it, when that was its only write so far
  // (kForever otherwise). Blocks with the same sole writer are siblings: one replay of it
  // rebuilds them all.
  std::uint32_t sole_writer(std::uint32_t b, std::uint32_t j) const {
    return slot_at(b, j) - version_base_[b] == 1 ? index_.block(b).writes[0] : kForever;
  }
  // The time term of a drop score: distance ^ distance_weight, without pow for the weights
  // the portfolio uses.
  double spread(double distance) const {
    const double w = options_.distance_weight;
    return w == 1.0 ? distance : w == 2.0 ? distance * distance : w == 0.5 ? std::sqrt(distance) : std::pow(distance, w);
  }

  const PlanRequest& request_;
  const RematOptions& options_;
  const TraceIndex& index_;
  const std::size_t n_;
  const std::uint32_t blocks_;
  plan::Plan* plan_ = nullptr;
  std::vector<State> state_;
  std::vector<std::uint32_t> dropped_at_;
  // Per block version (slot = version_base_[block] + writes so far).
  std::vector<std::uint32_t> version_base_, version_limit_, chain_limit_;
  std::vector<std::int64_t> version_compute_;
  std::vector<bool> version_ok_;
  std::vector<std::int64_t> pool_slot_, last_access_;
  std::vector<std::uint32_t> pool_;
  // Stamped with the attempt (targets restored and blocks locked there: a retry at the same op
  // starts afresh) or with the op (blocks the op itself uses).
  std::vector<std::uint32_t> target_stamp_, lock_stamp_, temp_stamp_, use_stamp_;
  std::uint32_t attempt_ = 0;
  std::vector<std::uint32_t> writes_before_, uses_before_;  // per block, before op advanced_to_
  std::uint32_t advanced_to_ = kForever;  // no sweep yet: reset() starts it at op 0
  std::vector<std::uint64_t> chain_stamp_;
  std::uint64_t chain_id_ = 0, chains_started_ = 0;
  std::uint32_t peak_rounds_ = 0;
  std::vector<plan::Interval> step_intervals_;     // the regenerations added before the current op
  std::vector<std::pair<std::uint32_t, bool>> step_targets_;  // blocks restored there; interval recorded?
  bool restore_inputs_now_ = true;
  std::vector<std::uint32_t> seq_last_read_, seq_stamp_;
  std::vector<std::uint32_t> pinned_from_, pinned_until_;   // not dropped in this window
  std::vector<std::uint32_t> failed_needs_, failed_restored_;  // of the last attempt
  std::vector<std::vector<std::uint32_t>> discard_after_;
  std::vector<bool> revived_;                  // rebuilt after the program freed it, for replays
  std::vector<std::uint32_t> revived_list_;
  std::size_t scan_start_ = 0;
  std::int64_t memory_ = 0;
};

}  // namespace delta::planner::remat
