// DELTA's planner. Candidates are the idle intervals of blocks (between two consecutive uses,
// or from the last use to the end of the step for blocks that outlive it). Each costs either a
// swap (the transfer time not hidden behind the compute in the gap, with evictions booked
// forward from the last use and prefetches backward from the next use on the copy lanes) or
// a regeneration (the producer's compute; only when replaying the producer alone restores the
// block). A sweep over the ops frees memory wherever the live-memory curve exceeds the budget,
// choosing each time the candidate with the least cost per byte and over-budget op covered;
// the budget then holds at every op. O((ops + uses) log) overall.
#pragma once

#include "common/plan_edits.hpp"

namespace delta::planner {

// How candidates are judged: DELTA's cost model, or the rules of two baselines that share the
// sweep (Capuchin: swap whenever it can be hidden, else regenerate; DELTA's public code: pick
// the block with the largest size x staleness, regenerate when that is cheaper than a round
// trip over PCIe, fetch on demand).
enum class Policy { delta, capuchin, delta_public };

// Which swaps of a block live before the step over the ops before its first use (an
// optimizer's state) the sweep may take. Such a gap covers every op over the budget up to that
// use, so it ranks first by cost per byte and op covered, while a copy out queued behind the
// others is charged only once, at the op being fixed: `any` takes as many as rank first,
// `within_link` only those whose copy out, booked on the lane, is done by the op being fixed
// and whose copy back is done by the state's first use, unless none of the candidates that
// rank first can free the op otherwise
// (the rest of the room comes from activations and parameters, rebuilt or swapped), `none`
// leaves them resident.
enum class StateSwaps { any, within_link, none };

struct DeltaOptions {
  Policy policy = Policy::delta;
  bool allow_swap = true;
  bool allow_regenerate = true;
  bool hide_prefetch = true;     // false: fetch on demand (prefetch issued at the use)
  int candidates_per_step = 8;   // exact evaluations per decision (lazy greedy)
  double size_weight = 1.0;      // score = cost / (size^w * covered over-budget ops)
  double exposed_swap_factor = 1.0;  // weight of exposed transfer time against compute
  std::size_t max_chain = 4;     // most ops replayed to regenerate one block
  bool discard_dead = false;     // free blocks after their last read, before the trace frees them
  // Blocks live before the step and first used late (an optimizer's state): which of their
  // swaps over the ops before their first use the sweep may take.
  StateSwaps state_swaps = StateSwaps::any;
  // A plan of regenerations the sweep builds on (delta/hybrid/): its blocks keep what it
  // decides, the inputs of its replays stay resident where they run, and the memory it holds
  // op by op is the curve the sweep starts from. The sweep's plan is this one with its own
  // choices added; a seed that does not run even with no limit is handed back as it is. Null:
  // the sweep starts from the trace.
  const plan::Plan* seed = nullptr;
  std::string method = "delta";
};

// A block live before the step and first used after op 1 (an optimizer's state): the sweep
// may swap it over the ops before that use.
inline bool idle_before_first_use(const BlockInfo& info) {
  return info.from_start && !info.uses.empty() && info.uses.front() > 1;
}

plan::Plan plan_with_sweep(const PlanRequest& request, const DeltaOptions& options);

}  // namespace delta::planner
