// Freed blocks that many replays rebuild, kept instead. A regeneration whose chain reads a
// block the program has already freed rebuilds that block first, inside its own replay list:
// GPT-2's causal mask (1 MiB, made by 14 small ops at the start of the step and freed at the
// end of the forward pass) was rebuilt inside each of the 79 rebuilds of an attention layer's
// softmax or dropout output in GPT2-XL's backward pass (bfloat16, batch 2, sequence 512, at 0.7
// of its peak). Held from the program's free to the last replay that reads it (a retention),
// the block costs its bytes, and every such replay skips the ops that only made it. The blocks
// rebuilt inside two replays or more are tried, most compute saved first, each kept where the
// simulator finds the plan faster.
#pragma once

#include "common/plan_edits.hpp"

#include <cstddef>

namespace delta::planner {

struct HubRetentionOptions {
  std::size_t max_tries = 8;  // blocks tried, one simulation each
};

// `judged` is the plan's verdict under `request` and stays so.
plan::Plan retain_rebuilt_inputs(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                 const HubRetentionOptions& options);

}  // namespace delta::planner
