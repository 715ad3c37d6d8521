// Writing plans: the helpers every method uses to start a plan, add an interval to it, find a
// block's decision, and write a regeneration by a block's version chain.
#pragma once

#include "common/request.hpp"
#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace delta::planner {

// Regenerates `block` before `needed_by` by replaying its version chain; inputs are what the
// chain reads besides the block itself.
plan::Interval regeneration_interval(const TraceIndex& index, std::uint32_t block, std::uint32_t release_after,
                                     std::uint32_t needed_by);
// Compute the ops of a regeneration's replay take, ns.
double replay_compute_ns(const TraceIndex& index, const plan::Interval& interval);
plan::Plan empty_plan(const PlanRequest& request, const std::string& method);
void add_interval(plan::Plan& plan, const TraceIndex& index, std::uint32_t block, plan::Interval interval);
// The decision for block `id` (trace::Block::id), or plan.decisions.end().
std::vector<plan::BlockDecision>::iterator find_decision(plan::Plan& plan, std::uint64_t id);
// The interval of `block` with this action that must end by `needed_by` (and in `previous` the
// one before it), or nullptr. Pointers into a plan do not survive judge(), which sorts the
// decisions: search again after each simulation.
plan::Interval* find_interval(plan::Plan& plan, std::uint64_t block, plan::Action action, std::uint64_t needed_by,
                              const plan::Interval** previous = nullptr);
// When `block`, away over `away` (one of its intervals), is first read again: at its need, or
// earlier by a rebuild in the gap whose replays read it (its inputs).
std::uint64_t first_read_back(const plan::Plan& plan, std::uint64_t block, const plan::Interval& away);
// Whether the interval rebuilds its block by replays (a regeneration or a revival).
inline bool rebuilds(const plan::Interval& x) { return x.action == plan::Action::regenerate || x.action == plan::Action::revive; }

}  // namespace delta::planner
