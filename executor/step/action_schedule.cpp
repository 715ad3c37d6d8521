#include "executor/step/action_schedule.hpp"

#include "executor/step/plan_checks.hpp"

#include <algorithm>

namespace delta::executor {

ActionSchedule schedule_actions(plan::Plan plan, const trace::Trace& trace, const StepProgram& program) {
  plan::check_plan_matches(plan, trace);  // the hash, the counts, every index in range
  check_plan_against_step(plan, trace, program);  // every decision one the executor can carry out
  ActionSchedule schedule;
  schedule.plan = std::move(plan);
  const std::size_t n = program.ops.size();
  schedule.ops.resize(n + 1);
  schedule.managed.assign(program.blocks.size(), false);
  schedule.own_pages.assign(program.blocks.size(), false);
  schedule.host_slot_bytes.assign(program.blocks.size(), 0);
  for (const plan::BlockDecision& decision : schedule.plan.decisions) {
    const std::uint32_t b = program.block_index(decision.block);
    const std::uint64_t size = program.blocks[b].size;
    for (const plan::Interval& interval : decision.intervals) {
      const Action action{b, &interval};
      OpActions& after = schedule.ops[interval.release_after];
      switch (interval.action) {
        case plan::Action::swap:
          schedule.ops[plan::copy_out_after(interval)].copy_out_after.push_back(action);
          after.release_after.push_back(action);
          schedule.ops[interval.prefetch_at].prefetch_at.push_back(action);
          schedule.host_slot_bytes[b] = std::max(schedule.host_slot_bytes[b], size);
          schedule.own_pages[b] = true;
          break;
        case plan::Action::regenerate:
          after.release_after.push_back(action);
          schedule.ops[interval.needed_by].rebuild_before.push_back(action);
          // A slot too: where a replay cannot be had, the block is swapped instead.
          schedule.host_slot_bytes[b] = std::max(schedule.host_slot_bytes[b], size);
          schedule.own_pages[b] = true;
          break;
        case plan::Action::discard:
          // A discarded block keeps a copy on the host: a program that strays from its trace
          // may still read it, and the executor never loses data it cannot prove dead.
          after.release_after.push_back(action);
          schedule.host_slot_bytes[b] = std::max(schedule.host_slot_bytes[b], size);
          schedule.own_pages[b] = true;
          break;
        case plan::Action::revive:
          schedule.ops[interval.needed_by].rebuild_before.push_back(action);
          schedule.ops[interval.until].let_go_after.push_back(action);
          break;
        case plan::Action::retain:
          after.hold_after.push_back(action);
          schedule.ops[interval.until].let_go_after.push_back(action);
          break;
      }
      schedule.managed[b] = true;
    }
  }
  // Copies back issued at one op take the lane in the plan's order, or in the order their
  // blocks are needed where the plan says so (plan.hpp).
  if (schedule.plan.predicted.copies_back_by_need)
    for (OpActions& due : schedule.ops)
      std::stable_sort(due.prefetch_at.begin(), due.prefetch_at.end(),
                       [](const Action& a, const Action& b) { return a.interval->needed_by < b.interval->needed_by; });
  for (std::uint64_t bytes : schedule.host_slot_bytes) schedule.host_bytes += bytes;
  schedule.packed_group.assign(program.blocks.size(), 0);
  if (schedule.plan.predicted.packed_moves && schedule.plan.predicted.packed_groups)
    for (const auto& [id, group] : plan::packed_groups(schedule.plan)) schedule.packed_group[program.block_index(id)] = group;
  return schedule;
}

}  // namespace delta::executor
