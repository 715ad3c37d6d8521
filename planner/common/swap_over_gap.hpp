// A swap over an idle gap of a block, written the way the planner's passes write new swaps:
// copied out from the block's last write, fetched back so that the copy ends before it is
// needed if the compute in between runs at native speed (with a fifth of the transfer to
// spare, since the lane is shared).
#pragma once

#include "common/plan_edits.hpp"

#include <cstdint>

namespace delta::planner {

// The op by which a block swapped over (after, before) must be back: its next use, or an
// earlier replay of `plan` that reads it.
std::uint64_t needed_back_by(const plan::Plan& plan, std::uint64_t id, std::uint64_t after, std::uint64_t before);

// Block `id` (trace::Block::id) released after op `release_after` and needed again by op
// `needed_by` (or sooner, by a replay of `plan` that reads it).
plan::Interval swap_over_gap(const PlanRequest& request, const plan::Plan& plan, std::uint64_t id,
                             std::uint64_t release_after, std::uint64_t needed_by);

}  // namespace delta::planner
