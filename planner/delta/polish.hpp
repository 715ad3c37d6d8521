// The polish of a candidate plan: lists of passes (delta/passes/pass.hpp), as the pipeline
// (delta/pipeline.cpp) gives them, run in rounds while the step gets faster, then the next
// list likewise, then the last once.
#pragma once

#include "common/request.hpp"
#include "delta/passes/pass.hpp"
#include "sim/simulator.hpp"

#include <delta/plan.hpp>

#include <span>

namespace delta::planner {

struct Polish {
  std::span<const Pass> rounds;       // in rounds (PassSettings::rounds at most) while faster
  std::span<const Pass> then_rounds;  // then these the same way
  std::span<const Pass> last;         // then these once
};

// `judged` becomes the polished plan's verdict. `early_copies`: the passes' new swaps copy out
// from their blocks' last writes and book the lanes from there; else from their releases.
plan::Plan polish(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const Polish& polish,
                  PassSettings settings, bool early_copies);

}  // namespace delta::planner
