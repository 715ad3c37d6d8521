#include "delta/passes/pass.hpp"

#include "common/early_copies.hpp"
#include "delta/passes/replays/revival_trim.hpp"
#include "sim/stage_clock.hpp"

#include <utility>

namespace delta::planner {

void run_rounds(std::span<const Pass> passes, const PlanRequest& request, plan::Plan& plan, SimulationResult& judged,
                const PassSettings& settings) {
  for (int round = 0; round < settings.rounds && judged.feasible; ++round) {
    const std::int64_t before = judged.step_time_ns;
    for (const Pass& pass : passes) {
      if (past_deadline(request)) return;
      if (!pass.run) {
        if (judged.step_time_ns >= before) return;
      } else if (pass.when(judged, settings)) {
        StageScope stage(pass.name);
        pass.run(request, plan, judged, settings);
      }
    }
  }
}

void run_once(std::span<const Pass> passes, const PlanRequest& request, plan::Plan& plan, SimulationResult& judged,
              const PassSettings& settings) {
  for (const Pass& pass : passes)
    if (pass.run && !past_deadline(request) && pass.when(judged, settings)) {
      StageScope stage(pass.name);
      pass.run(request, plan, judged, settings);
    }
}

void trim_revivals_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings&) {
  plan::Plan untrimmed = plan;
  if (trim_revivals(*request.index, plan) > 0) {
    SimulationResult trimmed = judge(request, plan);
    if (trimmed.feasible) judged = trimmed;
    else plan = std::move(untrimmed);  // never expected: trimming only frees what nothing reads
  }
}

void prune_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = prune_intervals(request, std::move(plan), judged, settings.pruning);
}

void swap_refinement_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = refine_with_swaps(request, std::move(plan), judged, settings.refinement);
}

void exchange_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = exchange_regenerations(request, std::move(plan), judged, settings.exchange);
}

void relieve_stalls_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = relieve_stalls(request, std::move(plan), judged, settings.exchange);
}

void advance_prefetches_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = advance_prefetches(request, std::move(plan), judged, settings.prefetches);
}

void later_state_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = swap_later_state(request, std::move(plan), judged, settings.later_state);
}

void reorder_state_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings&) {
  plan = reorder_state_swaps(request, std::move(plan), judged);
}

void hidden_swaps_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  constexpr std::size_t kTightOps = 4;  // the fullest ops with such blocks
  plan = swap_hidden_and_prune(request, std::move(plan), judged, settings.exchange, kTightOps, settings.hidden_prunes);
}

void share_replays_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = share_replays(request, std::move(plan), judged, settings.sharing);
}

void retention_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = retain_revived_blocks(request, std::move(plan), judged, settings.retention);
}

void hub_retention_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = retain_rebuilt_inputs(request, std::move(plan), judged, settings.hubs);
}

void hub_rebuild_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = rebuild_hubs_once(request, std::move(plan), judged, settings.hubs);
}

void source_swaps_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = swap_sources(request, std::move(plan), judged, settings.sources);
}

void early_copies_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings&) {
  start_copies_early_if_faster(request, plan, judged);
}

void partial_swaps_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = swap_parts(request, std::move(plan), judged, settings.parts);
}

void trimmed_swaps_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = trim_stalled_swaps(request, std::move(plan), judged, settings.trimmed);
}

void lane_head_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = exchange_at_lane_head(request, std::move(plan), judged, settings.lane_head);
}

void prefetch_deferral_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = defer_blocking_prefetches(request, std::move(plan), judged, settings.deferrals);
}

void swaps_rebuilt_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = rebuild_swaps_the_link_cannot_carry(request, std::move(plan), judged, settings.rebuilt_swaps);
}

void lane_gap_fill_pass(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, const PassSettings& settings) {
  plan = fill_lane_gaps(request, std::move(plan), judged, settings.lane_gaps);
}

}  // namespace delta::planner
