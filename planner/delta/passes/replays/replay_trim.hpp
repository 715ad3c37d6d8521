// Shortening a replay list once one of the blocks it rebuilds on the way is resident: the
// passes that keep such a block (hub_retention, hub_rebuild) cut the ops that only made it.
#pragma once

#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <cstdint>
#include <vector>

namespace delta::planner {

// The ops of `replay` still needed to rebuild block `target` once block `kept` is resident:
// from the end, an op is needed where it writes the target or a block a later needed op reads
// (other than `kept`).
std::vector<std::uint64_t> without_rebuilding(const TraceIndex& index, const std::vector<std::uint64_t>& replay,
                                              std::uint32_t target, std::uint32_t kept);

// What the replay reads that it does not make itself, the target aside: its inputs (block ids).
std::vector<std::uint64_t> replay_inputs(const TraceIndex& index, const std::vector<std::uint64_t>& replay, std::uint32_t target);

// The compute the regeneration `rebuild` of block `target` would skip once `kept` is
// resident: its ops without_rebuilding drops, ns.
double compute_saved_without(const TraceIndex& index, const plan::Interval& rebuild, std::uint32_t target, std::uint32_t kept);

// Shortens the regeneration `rebuild` of block `target` to the ops it still needs once `kept` is
// resident, its inputs read again from them; false where it needed none of the ops cut.
bool trim_replay(const TraceIndex& index, plan::Interval& rebuild, std::uint32_t target, std::uint32_t kept);

}  // namespace delta::planner
