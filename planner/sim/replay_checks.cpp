// The plan checked against the trace before it runs, and its events scheduled op by op
// (replay.hpp): every problem a plan can have is refused here, naming the op.
#include "sim/replay.hpp"

#include <algorithm>
#include <string>

namespace delta::planner::simulation {

Replay::Replay(const TraceIndex& index, const plan::Plan& plan, const SimulationOptions& options,
               std::unique_ptr<AllocatorLedger> ledger)
    : index_(index), options_(options), state_(index.blocks().size()), retained_(index.blocks().size(), 0), releases_(index.op_count()), copies_(index.op_count()), expiries_(index.op_count()),
      prefetches_(index.op_count() + 1), regenerations_(index.op_count() + 1) {
  const std::size_t n = index.op_count();
  if (options.host_pace) launch_ns_ = static_cast<std::int64_t>(options.gpu.launch_cost_ns());
  for (const plan::BlockDecision& decision : plan.decisions) {
    const std::uint32_t b = index.block_index(decision.block);
    const BlockInfo& info = index.block(b);
    // Named only for a message: built per decision, per simulation, it would cost more
    // than the checks.
    const auto name_of = [&info] { return "block " + std::to_string(info.id); };
    for (const plan::Interval& interval : decision.intervals) {
      if (interval.action == plan::Action::retain) {
        if (info.to_end || interval.release_after != info.last)
          throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                           "op " + std::to_string(interval.release_after) + ": the plan retains " + name_of() +
                               " after that op, but the program " +
                               (info.to_end ? std::string("holds it to the end of the step")
                                            : "frees it after op " + std::to_string(info.last)));
        if (interval.until <= interval.release_after || interval.until >= n)
          throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                           "op " + std::to_string(interval.release_after) + ": the plan retains " + name_of() + " until op " +
                               std::to_string(interval.until) + ", outside (" + std::to_string(interval.release_after) +
                               ", " + std::to_string(n - 1) + "]");
        retained_[b] = 1;
        expiries_.add(interval.until, {b, &interval});
        continue;
      }
      if (interval.action == plan::Action::revive) {
        check_revival(b, interval);
        regenerations_.add(interval.needed_by, {b, &interval});
        expiries_.add(interval.until, {b, &interval});
        continue;
      }
      if (interval.release_after < info.first || interval.release_after > info.last)
        throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                         "op " + std::to_string(interval.release_after) + ": the plan releases " + name_of() +
                             ", which is not live then (live over ops " + std::to_string(info.first) + ".." +
                             std::to_string(info.last) + ")");
      if (interval.action == plan::Action::discard) {
        if (info.to_end)
          throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                           "op " + std::to_string(interval.release_after) + ": the plan discards " + name_of() +
                               ", which must still be resident at the end of the step");
        // A use after the release exists if the last one is after it (one read, where the
        // binary search's cache misses were a quarter of scheduling a plan with many discards).
        if (!info.uses.empty() && info.uses.back() > interval.release_after) {
          const auto later = std::upper_bound(info.uses.begin(), info.uses.end(), static_cast<std::uint32_t>(interval.release_after));
          throw Infeasible(static_cast<std::int64_t>(*later),
                           op_name(*later) + ": uses " + name_of() + ", which the plan discarded after op " +
                               std::to_string(interval.release_after));
        }
        releases_.add(interval.release_after, {b, &interval});
        continue;
      }
      if (interval.needed_by > n)
        throw Infeasible(static_cast<std::int64_t>(n), "end of step: the plan brings back " + name_of() + " at op " +
                                                           std::to_string(interval.needed_by) + ", past the last op");
      if (!info.to_end && interval.needed_by > info.last)
        throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                         "op " + std::to_string(interval.needed_by) + ": the plan brings back " + name_of() +
                             " after it is freed (op " + std::to_string(info.last) + ")");
      if (interval.action == plan::Action::regenerate) {
        if (info.category == trace::Category::parameter || info.category == trace::Category::input || info.from_start)
          throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                           "op " + std::to_string(interval.needed_by) + ": " + name_of() + " is a " +
                               (info.from_start ? std::string("block live before the step") : trace::to_string(info.category)) +
                               " and cannot be regenerated");
        if (interval.replay.empty())
          throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                           "op " + std::to_string(interval.needed_by) + ": the regeneration of " + name_of() + " replays no op");
        for (std::uint64_t op : interval.replay)
          if (op >= interval.needed_by)
            throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                             "op " + std::to_string(interval.needed_by) + ": the regeneration of " + name_of() + " replays op " +
                                 std::to_string(op) + ", which has not run yet then");
      }
      if (interval.action == plan::Action::swap &&
          (interval.prefetch_at <= interval.release_after || interval.prefetch_at > interval.needed_by))
        throw Infeasible(static_cast<std::int64_t>(interval.needed_by),
                         "op " + std::to_string(interval.needed_by) + ": the plan prefetches " + name_of() + " at op " +
                             std::to_string(interval.prefetch_at) + ", outside its release (after op " +
                             std::to_string(interval.release_after) + ") and need");
      if (interval.action == plan::Action::swap && interval.bytes) {
        if (*interval.bytes == 0 || *interval.bytes >= info.size || *interval.bytes % plan::kSwapGranularity != 0)
          throw Infeasible(static_cast<std::int64_t>(interval.release_after),
                           "op " + std::to_string(interval.release_after) + ": the plan swaps " + std::to_string(*interval.bytes) +
                               " bytes of " + name_of() + ", which has " + std::to_string(info.size) +
                               " (a part must be whole pages of " + std::to_string(plan::kSwapGranularity) + " bytes, less than the block)");
        has_partial_swaps_ = true;
      }
      if (interval.action == plan::Action::swap && plan::copy_out_after(interval) != interval.release_after)
        schedule_early_copy(b, interval);
      releases_.add(interval.release_after, {b, &interval});
      if (interval.action == plan::Action::swap)
        prefetches_.add(interval.prefetch_at, {b, &interval});
      else
        regenerations_.add(interval.needed_by, {b, &interval});
    }
  }
  releases_.pack();
  copies_.pack();
  expiries_.pack();
  prefetches_.pack();
  // Copies back issued at one op take the lane in the plan's order, or in the order their
  // blocks are needed where the plan says so, as the executor issues them (plan.hpp).
  if (plan.predicted.copies_back_by_need)
    prefetches_.order_each([](const Scheduled& a, const Scheduled& b) { return a.interval->needed_by < b.interval->needed_by; });
  regenerations_.pack();
  if (has_partial_swaps_) {
    away_.assign(state_.size(), 0);
    host_bytes_.assign(state_.size(), 0);
  }
  if (options.through_allocator) {
    ledger_ = ledger ? std::move(ledger) : make_allocator_ledger(options.gpu.name, options.budget_bytes, options.packed_moves);
    if (!ledger_) throw std::runtime_error("this build has no caching allocator to simulate through");
    ledger_->set_clock(&clock_);
    if (options.executor_placement) {
      // Packed, the moved blocks are grouped as the executor groups them (plan::packed_groups).
      const auto groups = options.packed_moves && options.packed_groups ? plan::packed_groups(plan)
                                                                        : std::unordered_map<std::uint64_t, std::uint8_t>{};
      for (const plan::BlockDecision& decision : plan.decisions)
        for (const plan::Interval& interval : decision.intervals)
          if (interval.action == plan::Action::swap || interval.action == plan::Action::regenerate ||
              interval.action == plan::Action::discard) {
            const auto group = groups.find(decision.block);
            ledger_->mark_moved(index.block_index(decision.block), group == groups.end() ? 0 : group->second);
            break;
          }
    }
  }
}

void Replay::check_revival(std::uint32_t b, const plan::Interval& interval) const {
  const BlockInfo& info = index_.block(b);
  const auto at = static_cast<std::int64_t>(interval.needed_by);
  const auto where = [&] { return "op " + std::to_string(interval.needed_by) + ": the plan revives block " + std::to_string(info.id); };
  if (info.to_end) throw Infeasible(at, where() + ", which the program holds to the end of the step");
  if (interval.needed_by <= info.last)
    throw Infeasible(at, where() + " before the program frees it (after op " + std::to_string(info.last) + ")");
  if (interval.until < interval.needed_by || interval.until >= index_.op_count())
    throw Infeasible(at, where() + " until op " + std::to_string(interval.until) + ", outside [" + std::to_string(interval.needed_by) +
                             ", " + std::to_string(index_.op_count() - 1) + "]");
  if (info.category == trace::Category::parameter || info.category == trace::Category::input)
    throw Infeasible(at, where() + ", a " + trace::to_string(info.category) + ", which cannot be regenerated");
  if (interval.replay.empty()) throw Infeasible(at, where() + " by replaying no op");
  for (std::uint64_t op : interval.replay)
    if (op >= interval.needed_by) throw Infeasible(at, where() + " by replaying op " + std::to_string(op) + ", which has not run yet then");
}

void Replay::schedule_early_copy(std::uint32_t b, const plan::Interval& interval) {
  const BlockInfo& info = index_.block(b);
  const std::uint64_t from = plan::copy_out_after(interval);
  const auto where = [&] {
    return "op " + std::to_string(from) + ": the plan copies block " + std::to_string(info.id) + " to host";
  };
  if (from > interval.release_after) throw Infeasible(static_cast<std::int64_t>(from), where() + " after releasing it (op " + std::to_string(interval.release_after) + ")");
  if (from < info.first) throw Infeasible(static_cast<std::int64_t>(from), where() + " before it exists (op " + std::to_string(info.first) + ")");
  auto write = std::upper_bound(info.writes.begin(), info.writes.end(), static_cast<std::uint32_t>(from));
  if (write != info.writes.end() && *write <= interval.release_after)
    throw Infeasible(static_cast<std::int64_t>(*write), op_name(*write) + ": writes block " + std::to_string(info.id) +
                                                            ", whose copy to host started after op " + std::to_string(from) +
                                                            ": the copy would be stale");
  copies_.add(from, {b, &interval});
}

}  // namespace delta::planner::simulation
