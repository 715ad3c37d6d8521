// A plan turned into what the executor does at each op of the step: the plan's intervals
// indexed by the op after or before which each action is due. Built once when run mode
// starts; the per-op lists are what keeps a launch with no action due cheap.
#pragma once

#include "executor/step/step_program.hpp"

#include <delta/plan.hpp>

#include <cstdint>
#include <vector>

namespace delta::executor {

// One interval of one block, with the block as an index into StepProgram::blocks.
struct Action {
  std::uint32_t block = 0;
  const plan::Interval* interval = nullptr;  // points into ActionSchedule::plan
};

struct OpActions {
  std::vector<Action> copy_out_after;   // swaps: start the copy to host once this op is done
  std::vector<Action> release_after;    // swap, regenerate, discard: pages go once this op is done
  std::vector<Action> prefetch_at;      // swaps: map and copy back when this op is reached
  std::vector<Action> rebuild_before;   // regenerate and revive: replay just before this op
  std::vector<Action> hold_after;       // retain and revive: the program's free is held back ...
  std::vector<Action> let_go_after;     // ... until this op is done (`until`)
  bool empty() const {
    return copy_out_after.empty() && release_after.empty() && prefetch_at.empty() && rebuild_before.empty() &&
           hold_after.empty() && let_go_after.empty();
  }
};

struct ActionSchedule {
  // Actions point into `plan`: moving keeps them valid, a copy would not.
  ActionSchedule() = default;
  ActionSchedule(ActionSchedule&&) = default;
  ActionSchedule& operator=(ActionSchedule&&) = default;
  ActionSchedule(const ActionSchedule&) = delete;
  ActionSchedule& operator=(const ActionSchedule&) = delete;

  plan::Plan plan;
  std::vector<OpActions> ops;   // one per op, plus one for "the end of the step"
  std::vector<bool> managed;    // per block: the plan moves it at least once
  std::vector<bool> own_pages;  // per block: placed on pages of its own (its pages can go)
  // Per block, a plan fitted with its moved blocks packed: the group it is packed in
  // (plan::packed_groups, as the ledger that fitted the plan placed it).
  std::vector<std::uint8_t> packed_group;
  std::uint64_t host_bytes = 0; // pinned host memory the plan needs: one slot per block copied out
  std::vector<std::uint64_t> host_slot_bytes;  // per block (0: none)
};

// Refuses (plan::PlanError) a plan made for another trace, with the reason. Blocks the plan
// swaps, discards or regenerates are placed on pages of their own, so their pages can go.
ActionSchedule schedule_actions(plan::Plan plan, const trace::Trace& trace, const StepProgram& program);

}  // namespace delta::executor
