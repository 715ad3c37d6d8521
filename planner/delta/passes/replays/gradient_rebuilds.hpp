// Weight gradients rebuilt where the optimizer reads them, from their inputs held. A weight's
// gradient is made by one matrix product in the backward pass and read again only by the
// optimizer; the product's inputs (the layer's input and the gradient of its output) can be
// smaller together than the gradient (GPT2-XL's MLP weights at 1,024 tokens: 20.5 MB of
// gradient in bfloat16, 16.4 MB of inputs). Holding the inputs instead of the gradient from the
// backward pass to the optimizer frees the difference where the optimizer's state fills memory,
// for one replay of the product. The lower bound's optimum does this in the optimizer's first
// sweeps, where plans otherwise wait for the state's copies back. (At 1,024 tokens GPT2-large's
// and BERT-Large's weights are no larger than their inputs: nothing to gain there.)
//
// A rebuild pays only once the copies back move into the room it makes, which the passes on
// the plan as placed do (delta/pipeline.cpp), and the allocator must place the plan with it,
// which the fitting to the allocator judges: so the share of gradients rebuilt is chosen once,
// on the plan in live bytes at the whole budget, each way finished (choose_rebuild_share), and
// every plan in live bytes the fitting makes then rebuilds that share (rebuild_gradients).
// Opt-in (PlanRequest::rebuild_gradients, `deltactl plan --rebuild-gradients`) until the
// executor places such plans as the simulator's allocator does (docs/planner-results.md).
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace delta::planner {

// A gradient that can be rebuilt at its first read after its producer from inputs held.
struct GradientRebuild {
  std::uint32_t block = 0;          // index into TraceIndex::blocks
  std::uint32_t producer = 0;       // the op that makes it, replayed
  std::uint32_t first_read = 0;     // the op the rebuild is due by
  std::vector<std::uint32_t> held;  // inputs the program frees before first_read: retained until then
  std::int64_t freed_bytes = 0;     // the gradient's bytes less the held inputs'
};

// Every gradient of `plan` that can be so rebuilt and frees bytes, most bytes freed first (ties
// in block order): made by one op that allocates it and written by no other, kept by the plan
// from its producer to its first read, its producer's other blocks only read and unchanged until
// then, kept by the plan where they outlive that read, and held where the program frees them
// before it (a block live before the step is never held).
std::vector<GradientRebuild> gradient_rebuilds(const TraceIndex& index, const plan::Plan& plan);

// `plan` with the rebuilds applied: each gradient dropped after its producer and rebuilt by it
// just before its first read; each held input retained past its free until the latest rebuild
// that reads it (a discard of it after its last read gives way to the hold).
plan::Plan with_gradient_rebuilds(const TraceIndex& index, plan::Plan plan, const std::vector<GradientRebuild>& rebuilds);

// True when rebuilding every candidate of an empty plan would free at least a hundredth of
// the budget: where it frees less the choice is not worth its planning time.
bool gradients_worth_rebuilding(const TraceIndex& index, std::uint64_t budget_bytes);

// The first `share` of the plan's candidates (rounded to nearest, most bytes freed first)
// rebuilt, where the plan stays feasible under `request`; `judged` is the plan's verdict and
// stays so. False where nothing changed (a share of 0 changes nothing).
bool rebuild_gradients(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged, double share);

// The share of candidates (0, a quarter, a half) whose rebuilds make `plan` fastest once
// `finish` has run on it; 0 on a tie. `plan` is feasible under `request`, in live bytes.
using Finisher = std::function<void(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged)>;
double choose_rebuild_share(const PlanRequest& request, const plan::Plan& plan, const Finisher& finish);

}  // namespace delta::planner
