#include "delta/passes/evictions/eviction_exchange.hpp"

#include "common/early_copies.hpp"
#include "delta/passes/evictions/interval_pruning.hpp"
#include "sim/copy_lanes.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <tuple>

namespace delta::planner {
namespace {

struct Tried {
  double compute;  // what the regeneration replays, ns
  std::uint64_t block;
  std::uint64_t release_after;
};

struct Lanes {
  CopyLane d2h, h2d;
};

struct Candidate {
  std::uint32_t block;
  plan::Interval interval;
  double cost;                              // compute a regeneration replays; 0 for a swap
  std::int64_t out_start = 0, in_start = 0;  // a swap's bookings
};

std::int64_t copy_out_ns(const PlanRequest& request, std::uint64_t bytes) {
  return transfer_ns(bytes, request.gpu.d2h_bytes_per_s, request.gpu.launch_latency_ns);
}
std::int64_t copy_in_ns(const PlanRequest& request, std::uint64_t bytes) {
  return transfer_ns(bytes, request.gpu.h2d_bytes_per_s, request.gpu.launch_latency_ns);
}
std::int64_t start_of(const TraceIndex& index, std::uint64_t op) {
  return op >= index.op_count() ? index.native_step_ns() : index.native_start(op);
}

// The plan's swaps booked on the native timeline, in the order their copies start (they queue).
Lanes book_swaps(const PlanRequest& request, const plan::Plan& plan, bool early_copies) {
  const TraceIndex& index = *request.index;
  std::vector<std::pair<std::uint64_t, const plan::Interval*>> swaps;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::swap) swaps.emplace_back(decision.block, &interval);
  const auto copy_start = [&](const plan::Interval* x) { return early_copies ? plan::copy_out_after(*x) : x->release_after; };
  std::sort(swaps.begin(), swaps.end(), [&](const auto& a, const auto& b) { return copy_start(a.second) < copy_start(b.second); });
  Lanes lanes;
  for (const auto& [id, interval] : swaps) {
    const std::uint64_t size = index.block(index.block_index(id)).size;
    const std::int64_t out = copy_out_ns(request, size), in = copy_in_ns(request, size);
    const std::int64_t out_start = lanes.d2h.find_forward_or_queue(index.native_end(copy_start(interval)), out);
    lanes.d2h.reserve(out_start, out);
    std::int64_t in_start = lanes.h2d.find_backward(start_of(index, interval->needed_by), in, out_start + out);
    if (in_start < 0) in_start = lanes.h2d.find_forward_or_queue(start_of(index, interval->prefetch_at), in);
    lanes.h2d.reserve(in_start, in);
  }
  return lanes;
}

// The plan's decision of each block, by block index (null: none), for the scan over every block
// below: a search of the decisions per block made each repair step quadratic, and a hash lookup
// per block cost more than the rest of the scan's step.
std::vector<const plan::BlockDecision*> decisions_by_index(const TraceIndex& index, const plan::Plan& plan) {
  std::vector<const plan::BlockDecision*> by_index(index.blocks().size(), nullptr);
  for (const plan::BlockDecision& decision : plan.decisions)
    if (index.has_block(decision.block)) {
      const plan::BlockDecision*& slot = by_index[index.block_index(decision.block)];
      if (!slot) slot = &decision;
    }
  return by_index;
}

// True when the plan already frees the block somewhere in ops (after, before).
bool evicted_within(const plan::BlockDecision* decision, std::uint32_t after, std::uint32_t before) {
  if (!decision) return false;
  for (const plan::Interval& interval : decision->intervals)
    if (interval.release_after < before && interval.needed_by > after) return true;
  return false;
}

// Evictions of blocks idle across `op`: hidden swaps, and regenerations cheaper than
// `max_cost`. Those that cover `shortfall` first, cheapest then smallest; then the rest,
// largest first. At most `count`.
std::vector<Candidate> evictions_across(const PlanRequest& request, const plan::Plan& plan, const Lanes& lanes, std::uint32_t op,
                                        std::uint64_t shortfall, double max_cost, std::size_t count, bool early_copies) {
  const TraceIndex& index = *request.index;
  const std::uint32_t n = static_cast<std::uint32_t>(index.op_count());
  const std::vector<const plan::BlockDecision*> by_index = decisions_by_index(index, plan);
  // The plan's own replays read blocks too (a regeneration's inputs): an eviction must have its
  // block back before the first of them, as before its next use in the trace. Block b's reads
  // are replay_reads[read_start[b] .. read_start[b + 1]), sorted.
  std::vector<std::uint32_t> read_start(index.blocks().size() + 1, 0);
  std::vector<std::uint64_t> replay_reads;  // needed_by of each replay reading the block
  auto for_each_read = [&](auto&& visit) {
    for (const plan::BlockDecision& decision : plan.decisions)
      for (const plan::Interval& interval : decision.intervals)
        if (rebuilds(interval))
          for (std::uint64_t input : interval.inputs)
            if (index.has_block(input)) visit(index.block_index(input), interval.needed_by);
  };
  for_each_read([&](std::uint32_t b, std::uint64_t) { ++read_start[b + 1]; });
  for (std::size_t b = 0; b + 1 < read_start.size(); ++b) read_start[b + 1] += read_start[b];
  replay_reads.resize(read_start.back());
  std::vector<std::uint32_t> filled(read_start.begin(), read_start.end() - 1);
  for_each_read([&](std::uint32_t b, std::uint64_t needed_by) { replay_reads[filled[b]++] = needed_by; });
  for (std::size_t b = 0; b + 1 < read_start.size(); ++b)
    std::sort(replay_reads.begin() + read_start[b], replay_reads.begin() + read_start[b + 1]);
  // Every block idle across the op is weighed, but only `count` become candidates: the scan
  // keeps what orders them, and the intervals (a regeneration's inputs take a walk of its
  // chain) are made for the chosen few. The order is the one of sorting whole candidates.
  struct Found {
    std::uint32_t block, after, before, copy_from;
    std::uint64_t size;
    double cost;                       // a regeneration's replayed compute; 0 for a swap
    std::int64_t out_start, in_start;  // a swap's bookings; in_start < 0: a regeneration
  };
  std::vector<Found> found;
  for (const TraceIndex::IdleAcross& idle : index.idle_across(op)) {
    const std::uint32_t b = idle.block, after = idle.after;
    std::uint32_t before = idle.before;
    const BlockInfo& info = index.block(b);
    if (!may_move(request, info)) continue;
    const auto reads_end = replay_reads.begin() + read_start[b + 1];
    if (const auto first = std::upper_bound(replay_reads.begin() + read_start[b], reads_end, std::uint64_t{after});
        first != reads_end && *first < before) {
      if (*first <= op) continue;  // a replay reads it before the op: not idle across it
      before = static_cast<std::uint32_t>(*first);
    }
    const plan::BlockDecision* decision = by_index[b];
    if (evicted_within(decision, after, before)) continue;
    std::uint32_t resident_from = 0;  // back on the device after the block's earlier intervals
    if (decision)
      for (const plan::Interval& interval : decision->intervals)
        if (interval.needed_by <= after) resident_from = std::max(resident_from, static_cast<std::uint32_t>(interval.needed_by));
    const std::uint32_t copy_from = earliest_copy_out(index, b, after, resident_from);
    const std::int64_t out = copy_out_ns(request, info.size), in = copy_in_ns(request, info.size);
    // A copy out that could not end before the op even on an idle lane needs no lane search.
    const std::int64_t copy_earliest = index.native_end(early_copies ? copy_from : after);
    const std::int64_t out_start = copy_earliest + out > index.native_start(op) ? CopyLane::kFar : lanes.d2h.find_forward(copy_earliest, out);
    const std::int64_t in_start = out_start == CopyLane::kFar || out_start + out > index.native_start(op)
                                      ? -1
                                      : lanes.h2d.find_backward(start_of(index, before), in, index.native_end(op));
    if (in_start >= 0) {
      found.push_back({b, after, before, copy_from, info.size, 0.0, out_start, in_start});
    } else if (before < n && index.regenerable(b, before)) {
      double cost = 0;  // as replay_compute_ns sums the interval's replay, in the same order
      for (std::uint32_t replayed : index.version_chain(b, before)) cost += double(index.duration(replayed));
      if (cost < max_cost) found.push_back({b, after, before, copy_from, info.size, cost, 0, -1});
    }
  }
  std::sort(found.begin(), found.end(), [&](const Found& a, const Found& b) {
    const bool a_covers = a.size >= shortfall, b_covers = b.size >= shortfall;
    if (a_covers != b_covers) return a_covers;
    if (a_covers) return std::make_tuple(a.cost, a.size) < std::make_tuple(b.cost, b.size);
    return a.size > b.size;
  });
  if (found.size() > count) found.resize(count);
  std::vector<Candidate> chosen;
  chosen.reserve(found.size());
  for (const Found& f : found) {
    if (f.in_start < 0) {
      chosen.push_back({f.block, regeneration_interval(index, f.block, f.after, f.before), f.cost});
      continue;
    }
    plan::Interval swap;
    swap.action = plan::Action::swap;
    swap.release_after = f.after;
    swap.prefetch_at = std::clamp<std::uint64_t>(index.op_at_time(f.in_start), op + 1, f.before);
    swap.needed_by = f.before;
    if (early_copies && f.copy_from < f.after) swap.copy_after = f.copy_from;
    chosen.push_back({f.block, swap, 0.0, f.out_start, f.in_start});
  }
  return chosen;
}

}  // namespace

namespace {

// repair_with_evictions on lanes already booked; `lanes` gains the repair's swaps when it
// succeeds.
bool repair_on(const PlanRequest& request, plan::Plan& plan, SimulationResult& result, Lanes& lanes, double allowance,
               std::int64_t to_beat_ns, const EvictionExchangeOptions& options) {
  const TraceIndex& index = *request.index;
  std::size_t simulations_left = options.max_simulations;
  // Depth first: at each op over the budget, the cheapest few evictions that could free it,
  // all together costing less compute than `allowance`.
  std::function<bool(plan::Plan&, SimulationResult&, Lanes&, std::size_t, double)> repair =
      [&](plan::Plan& current, SimulationResult& now, Lanes& now_lanes, std::size_t depth, double left) {
        if (now.feasible) return now.step_time_ns < to_beat_ns;
        if (depth == options.max_added || now.shortfall_bytes == 0 || now.first_bad_op < 0 ||
            now.first_bad_op >= static_cast<std::int64_t>(index.op_count()))
          return false;
        for (const Candidate& c : evictions_across(request, current, now_lanes, static_cast<std::uint32_t>(now.first_bad_op),
                                                   now.shortfall_bytes, left, options.branching, options.early_copies)) {
          if (simulations_left == 0) return false;
          --simulations_left;
          plan::Plan next = current;
          add_interval(next, index, c.block, c.interval);
          SimulationResult next_result = judge(request, next);
          Lanes next_lanes = now_lanes;
          if (c.interval.action == plan::Action::swap) {
            const std::uint64_t size = index.block(c.block).size;
            next_lanes.d2h.reserve(c.out_start, copy_out_ns(request, size));
            next_lanes.h2d.reserve(c.in_start, copy_in_ns(request, size));
          }
          if (repair(next, next_result, next_lanes, depth + 1, left - c.cost)) {
            current = std::move(next);
            now = next_result;
            now_lanes = std::move(next_lanes);
            return true;
          }
        }
        return false;
      };
  Lanes booked = lanes;
  if (!repair(plan, result, booked, 0, allowance)) return false;
  lanes = std::move(booked);
  return true;
}

// Each candidate eviction added to the plan on its own, followed where it runs by `then`
// (which may change the candidate plan and its simulation); the fastest feasible result
// replaces `plan` and `judged` when it beats them.
template <typename Then>
void keep_fastest_move(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged,
                       const std::vector<Candidate>& candidates, Then then) {
  plan::Plan best;
  SimulationResult best_result = judged;
  for (const Candidate& c : candidates) {
    plan::Plan candidate = plan;
    add_interval(candidate, *request.index, c.block, c.interval);
    SimulationResult result = judge(request, candidate);
    if (!result.feasible) continue;
    then(c, candidate, result);
    if (result.feasible && result.step_time_ns < best_result.step_time_ns) {
      best = std::move(candidate);
      best_result = result;
    }
  }
  if (best_result.step_time_ns < judged.step_time_ns) {
    plan = std::move(best);
    judged = best_result;
  }
}

// One round of relieve_stalls: the longest stalls of the plan as it is, each tried with the
// cheapest evictions that free what the op allocates and with the largest hidden swaps (no
// compute at all), whatever they free; the fastest move at each op is kept.
void relieve_stalls_once(const PlanRequest& request, plan::Plan& plan, SimulationResult& judged,
                         const EvictionExchangeOptions& options, std::size_t max_ops) {
  const TraceIndex& index = *request.index;
  const SimulationResult traced = simulate_op_by_op(request, plan);
  for (const std::uint32_t op : longest_stalls(traced, max_ops)) {
    const double stall = double(traced.timeline[op].stall_ns);
    const Lanes lanes = book_swaps(request, plan, options.early_copies);
    std::uint64_t allocated = 0;  // what the op may have waited to place
    for (std::uint32_t b : index.allocated_at(op)) allocated += index.block(b).size;
    std::vector<Candidate> tried = evictions_across(request, plan, lanes, op, std::max<std::uint64_t>(1, allocated), stall,
                                                    options.branching, options.early_copies);
    for (Candidate& c : evictions_across(request, plan, lanes, op, std::numeric_limits<std::uint64_t>::max(), 0.0,
                                         options.branching, options.early_copies))
      if (std::none_of(tried.begin(), tried.end(), [&](const Candidate& t) { return t.block == c.block; })) tried.push_back(std::move(c));
    keep_fastest_move(request, plan, judged, tried, [](const Candidate&, plan::Plan&, SimulationResult&) {});
  }
}

}  // namespace

bool repair_with_evictions(const PlanRequest& request, plan::Plan& plan, SimulationResult& result, double allowance,
                           std::int64_t to_beat_ns, const EvictionExchangeOptions& options) {
  Lanes lanes = book_swaps(request, plan, options.early_copies);
  return repair_on(request, plan, result, lanes, allowance, to_beat_ns, options);
}

plan::Plan exchange_regenerations(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                  const EvictionExchangeOptions& options) {
  const TraceIndex& index = *request.index;
  if (!judged.feasible) return plan;
  std::vector<Tried> tries;
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::regenerate)
        tries.push_back({replay_compute_ns(index, interval), decision.block, interval.release_after});
  std::sort(tries.begin(), tries.end(), [](const Tried& a, const Tried& b) { return a.compute > b.compute; });
  if (tries.size() > options.max_tries) tries.resize(options.max_tries);
  Lanes lanes = book_swaps(request, plan, options.early_copies);
  for (const Tried& t : tries) {
    plan::Plan candidate = plan;
    auto decision = find_decision(candidate, t.block);
    if (decision == candidate.decisions.end()) continue;
    auto interval = std::find_if(decision->intervals.begin(), decision->intervals.end(), [&](const plan::Interval& x) {
      return x.release_after == t.release_after && x.action == plan::Action::regenerate;
    });
    if (interval == decision->intervals.end()) continue;
    decision->intervals.erase(interval);
    if (decision->intervals.empty()) candidate.decisions.erase(decision);
    SimulationResult result = judge(request, candidate);
    if (repair_on(request, candidate, result, lanes, t.compute, judged.step_time_ns, options)) {
      plan = std::move(candidate);
      judged = result;
    }
  }
  judged = judge(request, plan);
  return plan;
}

plan::Plan relieve_stalls(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                          const EvictionExchangeOptions& options, std::size_t max_ops) {
  // An eviction that shortens one stall can leave part of it, or move it: a few rounds, each
  // on the stalls as they are then.
  constexpr int kRounds = 3;
  for (int round = 0; round < kRounds && judged.feasible && judged.stall_ns > 0; ++round) {
    const std::int64_t before = judged.step_time_ns;
    relieve_stalls_once(request, plan, judged, options, max_ops);
    if (judged.step_time_ns >= before) break;
  }
  judged = judge(request, plan);
  return plan;
}

plan::Plan swap_hidden_and_prune(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                                 const EvictionExchangeOptions& options, std::size_t max_ops, std::size_t max_pruned) {
  if (!judged.feasible) return plan;
  const SimulationResult traced = simulate_op_by_op(request, plan);
  // The ops with the least room under the budget, fullest first: what frees memory there can
  // let the evictions that made that room go. Neighbouring ops have the same idle blocks, so
  // each block is tried once, at the fullest op it is idle across.
  std::vector<std::pair<std::int64_t, std::uint32_t>> tight;  // (-peak, op)
  for (std::uint32_t op = 0; op < traced.timeline.size(); ++op) tight.emplace_back(-traced.timeline[op].peak_bytes, op);
  std::sort(tight.begin(), tight.end());
  constexpr std::size_t kOpsScanned = 64;
  if (tight.size() > kOpsScanned) tight.resize(kOpsScanned);
  IntervalPruningOptions pruning;
  pruning.max_tries = max_pruned;
  std::vector<std::uint32_t> tried;
  std::size_t ops_done = 0;
  for (const auto& [negative_peak, op] : tight) {
    if (ops_done == max_ops) break;
    const Lanes lanes = book_swaps(request, plan, options.early_copies);
    // Hidden swaps only (no compute allowed), the largest first (none covers an endless
    // shortfall, so they sort by size).
    std::vector<Candidate> fresh;
    for (Candidate& c : evictions_across(request, plan, lanes, op, std::numeric_limits<std::uint64_t>::max(), 0.0,
                                         options.branching + tried.size(), options.early_copies))
      if (std::find(tried.begin(), tried.end(), c.block) == tried.end() && fresh.size() < options.branching)
        fresh.push_back(std::move(c));
    if (fresh.empty()) continue;
    ++ops_done;
    for (const Candidate& c : fresh) tried.push_back(c.block);
    keep_fastest_move(request, plan, judged, fresh, [&](const Candidate& c, plan::Plan& candidate, SimulationResult& result) {
      pruning.within = std::pair<std::uint64_t, std::uint64_t>{c.interval.release_after, c.interval.needed_by};
      candidate = prune_intervals(request, std::move(candidate), result, pruning);
    });
  }
  return plan;
}

}  // namespace delta::planner
