// Evicted blocks that other replays rebuild on the way, rebuilt once instead. A regeneration
// whose chain reads a block the plan has away at that point rebuilds the block first, inside
// its own replay list, and drops it again: GPT-2's MLP input to the GELU (the first projection's
// output, which the program keeps for the backward pass) was replayed inside each rebuild of
// the GELU's pieces, and once more where it was itself needed, up to five matrix products per
// layer in GPT2-XL's backward pass (bfloat16, batch 2, sequence 512, at 0.7 of its peak). Its
// own rebuild is brought forward to the first replay that needs it, made of that replay's ops
// that make it, and the block then stays resident until its use; the replays in between skip
// the ops that only made it. Tried for all such blocks at once, then in halves of what the
// simulator refuses, most compute saved first, each kept where it finds the plan faster.
#pragma once

#include "common/plan_edits.hpp"
#include "delta/passes/replays/hub_retention.hpp"

namespace delta::planner {

// `judged` is the plan's verdict under `request` and stays so. At most 8 * options.max_tries
// simulations.
plan::Plan rebuild_hubs_once(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                             const HubRetentionOptions& options);

}  // namespace delta::planner
