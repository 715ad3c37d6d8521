// What every planning method is given (the trace, the GPU, the budget and how to judge), and
// judge(): the simulator's verdict on a plan under that request, recorded in the plan.
#pragma once

#include "sim/simulator.hpp"
#include "trace/trace_index.hpp"

#include <delta/device.hpp>
#include <delta/plan.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace delta::planner {

class StageMemo;

struct PlanRequest {
  const TraceIndex* index = nullptr;
  GpuProfile gpu;
  std::uint64_t budget_bytes = 0;
  double budget_ratio = 0;  // budget / native peak, recorded in plans
  // Judge plans through the caching allocator on a sim device capped at the budget, so that
  // fragmentation counts (planning then aims below the budget until the allocator fits).
  bool through_allocator = false;
  // With through_allocator: moved blocks placed as the executor places them
  // (SimulationOptions::executor_placement).
  bool executor_placement = false;
  // With executor_placement: the moved blocks packed side by side (Placement::packed) rather
  // than each on whole pages of its own. fit_to_allocator chooses it per plan.
  bool packed_moves = false;
  // With packed_moves: the moved blocks packed in groups by when they are away
  // (plan::packed_groups, Placement::group). fit_to_allocator chooses it per plan too.
  bool packed_groups = false;
  // Judge plans as the executor runs discards by default: each copied to host before its
  // bytes go (SimulationOptions::discard_copies, ExecutorOptions::copy_discards). A plan
  // made for execution should count them; comparisons between planners need not.
  bool discard_copies = false;
  // The plan is made with discards free but will be judged with their copies (the side of
  // plan_delta made so, delta/pipeline.cpp): the family that rebuilds activations beside state
  // swaps then discards nothing, as with the copies (delta/hybrid/).
  bool discards_copied_later = false;
  // Judge plans, and the native step, with the host's launch pace (SimulationOptions::
  // host_pace), as the sim device runs them: where kernels are shorter than a launch's host
  // cost, the host sets the pace (the recorded GPT-2 on the H200 profile: 104.1 ms, not the
  // 94.7 ms of its kernels).
  bool host_pace = false;
  // Blocks smaller than this are never moved (no swap, regeneration or discard of them is
  // planned); 0: any block may move. Under executor placement a moved block sits on pages of
  // its own, so moving a block smaller than a page frees less than its rounding wastes while
  // it is resident (gpt2-large's plan at 0.7 of its peak discarded 290 gradients of a few KB
  // each and moved 45 more small blocks: 0.7 GB of pages). Fitting sets it to a page where
  // moving smaller blocks keeps the allocator from placing a plan (delta/fitting.cpp).
  std::uint64_t min_moved_bytes = 0;
  // Blocks live before the step (BlockInfo::from_start) smaller than this never move either.
  // Auto mode's step holds them where the online policy placed them, on pages they share with
  // other blocks, at the switch (autopilot/background_planner.cpp): a plan that moves them is
  // one the executor cannot run as made. 0: they may.
  std::uint64_t min_moved_persistent_bytes = 0;
  // Whether DELTA's portfolio may also try plans that swap an optimizer's state only as far as
  // the link carries its copies out in time (delta/portfolio.cpp, fewer_state_swaps). They
  // free more memory through the backward pass and so pack it tighter; fitting turns them off
  // where the allocator cannot place such a plan (delta/fitting.cpp).
  bool state_swaps_within_link = true;
  // False: parameters stay resident (Portfolio::fewer_parameter_swaps plans so beside the
  // rest), but for the sweep's last resort: where nothing else can free an op, it swaps one
  // there (SweepPlanner::release_held_back). No other stage moves one.
  bool move_parameters = true;
  // Whether DELTA's plans may rebuild weight gradients from their inputs held
  // (delta/passes/replays/gradient_rebuilds.hpp). Off by default: on GPT2-XL bfloat16 at 0.7
  // of its peak the plan so made, placed by the simulator's allocator within the budget, had
  // the executor on the sim device serve one allocation above it (docs/planner-results.md,
  // "Weight gradients rebuilt from their inputs held").
  bool rebuild_gradients = false;
  // The share of the weight gradients that can be rebuilt from their inputs held that DELTA's
  // plans in live bytes rebuild, most bytes freed first. DELTA's pipeline chooses it once
  // before the fitting where rebuild_gradients allows; 0: none.
  double gradient_rebuild_share = 0;
  // Threads the planner may use for independent candidates (0: DELTA_PLANNER_THREADS, else one
  // per core). The plan chosen does not depend on it.
  std::size_t threads = 0;
  // Local search on DELTA's chosen plan (delta/local_search.hpp): at most `search_rounds`
  // rounds, ending after `search_patience` rounds without a faster plan. Absent: the defaults
  // for the trace's size (short traces only). 0 rounds: none; patience 0: never ends early.
  std::optional<std::size_t> search_rounds, search_patience;
  // After the local search, search again from the plan with the lower bound's choice at the op
  // in most excess (delta/bound_guided.hpp): needs an LP solver, and costs the bound's LP, a
  // polish and a second search (resnet32 at 0.2 of its peak: 1.16663 to 1.16543, 4.6 to
  // 11.7 s). Absent: on traces of up to 2,000 ops and block uses together, where that takes
  // seconds.
  std::optional<bool> search_from_bound;
  // Called when the local search finds a faster plan, and once when it ends. May be empty.
  struct SearchProgress {
    std::size_t round = 0;         // rounds done
    std::size_t improvements = 0;  // faster plans found so far
    double overhead = 1;           // of the plan the search holds now
    bool done = false;
    bool from_bound = false;       // the second search, from the lower bound's optimum (search_from_bound)
    const char* plan = "";         // which of plans made side by side, or "" (delta/pipeline.cpp)
  };
  std::function<void(const SearchProgress& progress)> on_search_progress;
  // Called after each budget fraction the fitting tries, with the allocator's verdict. For
  // progress on long plans; may be empty.
  struct FitAttempt {
    double fraction = 1;      // of the budget, planned for in live bytes
    bool fits_live = false;   // a plan fits that in live bytes
    std::string repaired_at;  // where the allocator first refused, when evictions there made room
    const char* plan = "";    // which of plans made side by side, or "" (delta/pipeline.cpp)
  };
  std::function<void(const FitAttempt& attempt, const SimulationResult& placed)> on_fit_attempt;
  // Called with a sentence on a choice the planner made that a reader of its progress would
  // ask about (which of two plans it kept, and why). May be empty.
  std::function<void(const std::string& note)> on_note;
  // Where set, DELTA's stages keep the plans they make here and take those kept by an earlier
  // plan of the same trace, budget and smallest block moved (common/stage_memo.hpp): the
  // fitting sets it per live budget. Null: the portfolio keeps a memo of its own.
  StageMemo* stage_memo = nullptr;
  // A limit on planning time. Past it the planner refines no more: no further passes or tries
  // of a pass, no local search, no fractions of the budget beyond the first the allocator
  // places, other placements judged only on the plans already made, no candidates beyond the
  // sweeps. The plan in live bytes and its fitting take half the time left, the passes on the
  // plan as placed the rest (delta/pipeline.cpp). It still makes what a plan needs (the fitting
  // goes on down its fractions until one is placed) and returns the fastest plan it has,
  // judged as any other; a pass running when the time passes ends at its next try. The plan
  // then depends on the machine's speed. Absent: no limit, and the plan never does.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Whether `request` has a time limit and it has passed (PlanRequest::deadline).
inline bool past_deadline(const PlanRequest& request) {
  return request.deadline && std::chrono::steady_clock::now() >= *request.deadline;
}

// The time limit of a stage that leaves the rest of the request's time to the stages after it:
// `share` of the way from now to the request's own limit (none where the request has none).
inline std::optional<std::chrono::steady_clock::time_point> share_of_time_left(const PlanRequest& request, double share) {
  if (!request.deadline) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  if (now >= *request.deadline) return request.deadline;
  return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>((*request.deadline - now) * share);
}

// Whether the request keeps block `info` where it is whatever else it allows
// (PlanRequest::min_moved_bytes, min_moved_persistent_bytes).
inline bool pinned(const PlanRequest& request, const BlockInfo& info) {
  return info.size < request.min_moved_bytes || (info.from_start && info.size < request.min_moved_persistent_bytes);
}

// Whether the request lets block `info` move (pinned, PlanRequest::move_parameters).
inline bool may_move(const PlanRequest& request, const BlockInfo& info) {
  return !pinned(request, info) && (request.move_parameters || info.category != trace::Category::parameter);
}

// The simulator's options that judge plans for `request` (no timeline).
SimulationOptions simulation_options(const PlanRequest& request);

// Simulates `plan` under `request` (through the caching allocator when it says so) and records
// the verdict in plan.predicted; sorts the plan's decisions by block first where they are not.
SimulationResult judge(const PlanRequest& request, plan::Plan& plan);

// judge(request, trial) where its verdict is feasible and faster than `than_ns`; nothing (and
// `trial` not judged) where it is not. Through the allocator, the plan is first simulated in
// live bytes, a tenth of the cost: the allocator only adds waits to a plan (where it cannot
// place an allocation at once), so a plan no faster in live bytes is no faster placed.
std::optional<SimulationResult> judge_if_faster(const PlanRequest& request, plan::Plan& trial, std::int64_t than_ns);

// `request` with the moved blocks placed as `plan` was fitted (packed, in groups, or not), the
// way a finished plan is judged.
PlanRequest as_placed(const PlanRequest& request, const plan::Plan& plan);

// The step judge() judges, simulated with its op-by-op timeline (stalls, peaks), as the passes
// read it; the plan is left as it is.
SimulationResult simulate_op_by_op(const PlanRequest& request, const plan::Plan& plan);

// The ops of `traced` (a timeline) that wait longest before they start, longest first, at most
// `max_ops` of them.
std::vector<std::uint32_t> longest_stalls(const SimulationResult& traced, std::size_t max_ops);

// Whether `seen`, an op-by-op simulation, ran the whole step (a pass that reads its timeline
// needs every op of it).
inline bool traced_whole(const PlanRequest& request, const SimulationResult& seen) {
  return seen.feasible && seen.timeline.size() == request.index->op_count();
}

// Judges `trial`, an edited copy of `plan`; where the simulator finds it feasible and faster
// than `judged`, it becomes `plan` and `judged` its verdict, and `seen` is simulated op by op
// again. Returns whether it was kept.
inline bool keep_if_faster(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, plan::Plan& trial,
                           SimulationResult& seen) {
  std::optional<SimulationResult> result = judge_if_faster(request, trial, judged.step_time_ns);
  if (!result) return false;
  plan = std::move(trial);
  judged = std::move(*result);
  seen = simulate_op_by_op(request, plan);
  return true;
}

// The shape of a pass that works where the plan waits: at each of the `max_ops` ops that stall
// longest (chosen once, from the plan as given) while the op still waits as the plan is now,
// `move(trial, seen, op, attempt)` edits a copy of the plan, for attempt 0, 1, ... until it
// returns false; `seen` is the plan's op-by-op simulation. The first edit the simulator finds
// feasible and faster is kept, and the plan simulated op by op again. `judged` is the plan's
// verdict under `request` and stays so.
template <typename Move>
plan::Plan keep_faster_at_longest_stalls(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                         std::size_t max_ops, Move&& move) {
  if (!judged.feasible || judged.stall_ns == 0) return plan;
  SimulationResult seen = simulate_op_by_op(request, plan);
  if (!traced_whole(request, seen)) return plan;
  for (const std::uint32_t op : longest_stalls(seen, max_ops)) {
    if (past_deadline(request)) break;
    if (seen.timeline[op].stall_ns <= 0) continue;
    for (int attempt = 0;; ++attempt) {
      plan::Plan trial = plan;
      if (!move(trial, seen, op, attempt)) break;
      if (!keep_if_faster(request, plan, judged, trial, seen)) continue;
      if (!traced_whole(request, seen)) return plan;
      break;
    }
  }
  return plan;
}

}  // namespace delta::planner
