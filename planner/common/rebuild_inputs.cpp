#include "common/rebuild_inputs.hpp"

#include "common/swap_over_gap.hpp"

#include <algorithm>

namespace delta::planner {

std::vector<std::uint64_t> replay_reads(const TraceIndex& index, const plan::Interval& rebuild) {
  std::vector<std::uint32_t> written;
  std::vector<std::uint64_t> reads;
  for (std::uint64_t op : rebuild.replay)
    for (const OpUse& u : index.uses(static_cast<std::size_t>(op))) {
      if (u.read && std::find(written.begin(), written.end(), u.block) == written.end()) reads.push_back(index.block(u.block).id);
      if (u.write) written.push_back(u.block);
    }
  return reads;
}

void inputs_back_in_time(const PlanRequest& request, plan::Plan& plan) {
  const TraceIndex& index = *request.index;
  // Every change moves some interval's needed_by strictly earlier, and never before its
  // release, so this ends; but a pass may move a chain by one rebuild's point only (unet at 0.3
  // needs a dozen passes down a staircase of rebuilds), so the cap is a guard, not a budget.
  constexpr int kPasses = 10000;
  for (int pass = 0; pass < kPasses; ++pass) {
    bool changed = false;
    for (const plan::BlockDecision& reader : plan.decisions)
      for (const plan::Interval& x : reader.intervals) {
        if (!rebuilds(x)) continue;
        for (std::uint64_t input : replay_reads(index, x)) {
          if (input == reader.block) continue;
          auto decision = find_decision(plan, input);
          if (decision == plan.decisions.end()) continue;
          for (plan::Interval& y : decision->intervals) {
            if (y.action == plan::Action::discard || !(y.release_after < x.needed_by && x.needed_by < y.needed_by)) continue;
            if (y.action == plan::Action::swap)
              y = swap_over_gap(request, plan, input, y.release_after, x.needed_by);
            else
              y.needed_by = x.needed_by;
            changed = true;
          }
        }
      }
    if (!changed) return;
  }
}

}  // namespace delta::planner
