// The one shape of a refinement pass, as DELTA's pipeline (delta/pipeline.cpp) lists them: a
// pass takes a feasible plan and its verdict, changes the plan only where the simulator finds
// it faster (never slower, never over the budget), and leaves `judged` the verdict of the plan
// it returns. Each pass below wraps one of the passes in this folder's rooms (evictions/,
// copies/, replays/) with the settings the pipeline sized for the trace; a new pass is a
// function of this shape and a line in the list where it should run.
#pragma once

#include "common/request.hpp"
#include "delta/passes/placed/lane_gap_fill.hpp"
#include "delta/passes/copies/lane_head_exchange.hpp"
#include "delta/passes/copies/later_state_swaps.hpp"
#include "delta/passes/copies/partial_swaps.hpp"
#include "delta/passes/copies/prefetch_advance.hpp"
#include "delta/passes/placed/prefetch_deferral.hpp"
#include "delta/passes/placed/swaps_rebuilt.hpp"
#include "delta/passes/placed/trimmed_swaps.hpp"
#include "delta/passes/evictions/eviction_exchange.hpp"
#include "delta/passes/evictions/interval_pruning.hpp"
#include "delta/passes/evictions/source_swaps.hpp"
#include "delta/passes/evictions/swap_refinement.hpp"
#include "delta/passes/replays/hub_rebuild.hpp"
#include "delta/passes/replays/hub_retention.hpp"
#include "delta/passes/replays/replay_sharing.hpp"
#include "delta/passes/replays/revival_retention.hpp"
#include "sim/simulator.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace delta::planner {

// How hard each pass tries: sized for the trace by the portfolio (delta/portfolio.cpp).
struct PassSettings {
  int rounds = 1;                  // of a list run in rounds (run_rounds)
  IntervalPruningOptions pruning;
  SwapRefinementOptions refinement;
  ReplaySharingOptions sharing;
  EvictionExchangeOptions exchange;   // the exchange, stall relief and hidden swaps
  RevivalRetentionOptions retention;
  std::size_t hidden_prunes = 0;  // evictions pruned after each hidden swap (0: no hidden swaps)
  PartialSwapOptions parts;
  TrimmedSwapOptions trimmed;
  LaneHeadOptions lane_head;
  PrefetchAdvanceOptions prefetches;
  HubRetentionOptions hubs;
  LaterStateOptions later_state;
  SourceSwapOptions sources;
  SwapsRebuiltOptions rebuilt_swaps;
  PrefetchDeferralOptions deferrals;
  LaneGapFillOptions lane_gaps;
};

struct Pass {
  const char* name;
  // Whether the pass has anything to do on a plan with this verdict.
  bool (*when)(const SimulationResult& judged, const PassSettings& settings);
  // Null: the end of a round that did not make the step faster (see run_rounds).
  void (*run)(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings);
};

// Runs the list in rounds, at most settings.rounds, while the plan is feasible. kUntilFaster in
// the list ends the rounds where the step is no faster than at the round's start.
void run_rounds(std::span<const Pass> passes, const PlanRequest& request, plan::Plan& plan, SimulationResult& judged,
                const PassSettings& settings);
// Runs the list once, in order.
void run_once(std::span<const Pass> passes, const PlanRequest& request, plan::Plan& plan, SimulationResult& judged,
              const PassSettings& settings);

// When a pass runs.
inline bool always(const SimulationResult&, const PassSettings&) { return true; }
inline bool has_regenerations(const SimulationResult& judged, const PassSettings&) { return judged.regenerations > 0; }
inline bool exchange_on(const SimulationResult& judged, const PassSettings& settings) {
  return judged.regenerations > 0 && settings.exchange.max_tries > 0;
}
inline bool has_stalls(const SimulationResult& judged, const PassSettings&) { return judged.stall_ns > 0; }
inline bool has_two_rebuilds(const SimulationResult& judged, const PassSettings&) {
  return judged.regenerations + judged.revivals > 1;
}
inline bool has_revivals(const SimulationResult& judged, const PassSettings&) { return judged.revivals > 0; }
inline bool source_swaps_on(const SimulationResult& judged, const PassSettings& settings) {
  return judged.swaps > 0 && settings.sources.max_groups > 0;
}
inline bool hidden_swaps_on(const SimulationResult&, const PassSettings& settings) { return settings.hidden_prunes > 0; }

constexpr Pass kUntilFaster{"until a round gains nothing", always, nullptr};

// The passes (pass.cpp), each over the file named beside it (in its room).
void trim_revivals_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);     // revival_trim
void prune_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);             // interval_pruning
void swap_refinement_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);   // swap_refinement
void exchange_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);          // eviction_exchange
void relieve_stalls_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);    // eviction_exchange
void advance_prefetches_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);  // prefetch_advance
void later_state_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);       // later_state_swaps
void reorder_state_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);       // later_state_swaps
void hidden_swaps_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);      // eviction_exchange
void share_replays_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);     // replay_sharing
void retention_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);         // revival_retention
void hub_retention_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);     // hub_retention
void hub_rebuild_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);       // hub_rebuild
void source_swaps_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);      // source_swaps
void early_copies_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);      // common/early_copies
void partial_swaps_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);     // partial_swaps
void trimmed_swaps_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);     // trimmed_swaps
void lane_head_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);         // lane_head_exchange
void prefetch_deferral_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);  // prefetch_deferral
void swaps_rebuilt_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);     // swaps_rebuilt
void lane_gap_fill_pass(const PlanRequest&, plan::Plan&, SimulationResult&, const PassSettings&);     // lane_gap_fill

}  // namespace delta::planner
