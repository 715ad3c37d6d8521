#include "delta/local_search.hpp"

#include "common/parallel_for.hpp"
#include "common/swap_over_gap.hpp"
#include "delta/passes/pass.hpp"
#include "sim/simulator.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <utility>

namespace delta::planner {
namespace {

// What each try runs after its repair: a short polish near the change, in rounds (at most two)
// while the step gets faster.
constexpr Pass kSettle[] = {
    {"prune evictions near the change", always, prune_pass},
    {"regenerations become swaps", has_regenerations, swap_refinement_pass},
    {"regenerations traded for cheaper evictions", has_regenerations, exchange_pass},
    {"relieve the longest stalls", has_stalls, relieve_stalls_pass},
    {"share replays between rebuilds", has_two_rebuilds, share_replays_pass},
    kUntilFaster,
};

struct Perturbed {
  plan::Plan plan;
  SimulationResult verdict;
};

// One try: change a few evictions of `start`, repair, polish. Infeasible verdict when the
// repair found no way under the budget.
Perturbed perturb_and_settle(const PlanRequest& request, const plan::Plan& start, std::uint64_t seed,
                             const LocalSearchOptions& options) {
  const TraceIndex& index = *request.index;
  std::mt19937_64 rng(seed);
  Perturbed out{start, {}};
  out.verdict.feasible = false;
  plan::Plan& plan = out.plan;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> evictions;  // (block id, release_after)
  for (const plan::BlockDecision& decision : plan.decisions)
    for (const plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::swap || interval.action == plan::Action::regenerate)
        evictions.emplace_back(decision.block, interval.release_after);
  if (evictions.empty()) return out;
  const std::size_t changes = 1 + rng() % std::max<std::size_t>(1, options.max_changes);
  std::uint64_t first_op = std::numeric_limits<std::uint64_t>::max(), last_op = 0;
  for (std::size_t c = 0; c < changes; ++c) {
    const std::uint64_t pick = rng() % evictions.size();
    const std::uint64_t id = evictions[pick].first, release_after = evictions[pick].second;
    const int kind = static_cast<int>(rng() % 3);
    auto decision = find_decision(plan, id);
    if (decision == plan.decisions.end()) continue;
    auto interval = std::find_if(decision->intervals.begin(), decision->intervals.end(),
                                 [&](const plan::Interval& x) { return x.release_after == release_after; });
    if (interval == decision->intervals.end() ||
        (interval->action != plan::Action::swap && interval->action != plan::Action::regenerate))
      continue;  // changed by an earlier change of this try
    first_op = std::min<std::uint64_t>(first_op, interval->release_after);
    last_op = std::max<std::uint64_t>(last_op, interval->needed_by);
    const std::uint32_t b = index.block_index(id);
    if (kind == 1 && interval->action == plan::Action::regenerate) {
      *interval = swap_over_gap(request, plan, id, interval->release_after, interval->needed_by);
    } else if (kind == 2 && interval->action == plan::Action::swap && interval->needed_by < index.op_count() &&
               index.regenerable(b, static_cast<std::uint32_t>(interval->needed_by))) {
      *interval = regeneration_interval(index, b, static_cast<std::uint32_t>(interval->release_after),
                                        static_cast<std::uint32_t>(interval->needed_by));
    } else {
      decision->intervals.erase(interval);  // kept over the gap
      if (decision->intervals.empty()) plan.decisions.erase(decision);
    }
  }
  SimulationResult verdict = judge(request, plan);
  if (!verdict.feasible) {
    if (verdict.shortfall_bytes == 0) return out;  // a replay or a copy the change broke: no repair for that
    const double allowance = 0.1 * double(index.native_step_ns());
    if (!repair_with_evictions(request, plan, verdict, allowance, std::numeric_limits<std::int64_t>::max(),
                               options.exchange))
      return out;
  }
  PassSettings settle;
  settle.rounds = 2;
  settle.pruning.within = std::make_pair(first_op, last_op);
  settle.refinement.max_tries = options.swap_tries;
  settle.refinement.early_copies = options.exchange.early_copies;
  settle.exchange = options.exchange;
  run_rounds(kSettle, request, plan, verdict, settle);
  out.verdict = verdict;
  return out;
}

}  // namespace

plan::Plan search_locally(const PlanRequest& request, plan::Plan plan, SimulationResult& judged,
                          const LocalSearchOptions& options) {
  if (!judged.feasible || options.rounds == 0 || options.width == 0) return plan;
  const std::size_t threads = planner_threads(request.threads);
  std::int64_t confirmed_ns = 0;  // the plan's step time under options.confirm_with
  if (options.confirm_with) {
    SimulationResult confirmed = judge(*options.confirm_with, plan);
    if (!confirmed.feasible) return plan;
    confirmed_ns = confirmed.step_time_ns;
  }
  std::size_t idle = 0, improvements = 0, round = 0;
  auto report = [&](bool done) {
    if (!request.on_search_progress) return;
    // Where the allocator confirms, its verdict is the one that counts.
    const double overhead = options.confirm_with ? double(confirmed_ns) / double(judged.native_step_time_ns) : judged.overhead();
    request.on_search_progress({round, improvements, overhead, done, options.from_bound});
  };
  for (; round < options.rounds && !past_deadline(request);) {
    std::vector<Perturbed> tries(options.width);
    parallel_for(options.width, threads, [&](std::size_t k) {
      // A seed of its own per try (splitmix-style spread of seed, round and rank).
      const std::uint64_t seed = options.seed * 0x9E3779B97F4A7C15ull ^ (round * options.width + k + 1) * 0xBF58476D1CE4E5B9ull;
      tries[k] = perturb_and_settle(request, plan, seed, options);
    });
    std::size_t best = tries.size();
    for (std::size_t k = 0; k < tries.size(); ++k)
      if (tries[k].verdict.feasible && tries[k].verdict.step_time_ns < judged.step_time_ns &&
          (best == tries.size() || tries[k].verdict.step_time_ns < tries[best].verdict.step_time_ns))
        best = k;
    ++round;
    if (best < tries.size() && options.confirm_with) {
      // Where the allocator cannot place an allocation, evictions there often make room (as
      // when the plan was fitted); the repaired plan is kept only when faster there too.
      SimulationResult confirmed = judge(*options.confirm_with, tries[best].plan);
      if (!confirmed.feasible && confirmed.shortfall_bytes > 0) {
        const double allowance = 0.01 * double(request.index->native_step_ns());
        if (repair_with_evictions(*options.confirm_with, tries[best].plan, confirmed, allowance, confirmed_ns,
                                  options.exchange))
          tries[best].verdict = judge(request, tries[best].plan);
      }
      if (confirmed.feasible && confirmed.step_time_ns < confirmed_ns && tries[best].verdict.feasible)
        confirmed_ns = confirmed.step_time_ns;
      else
        best = tries.size();
    }
    if (best == tries.size()) {
      if (options.patience > 0 && ++idle >= options.patience) break;
      continue;
    }
    idle = 0;
    ++improvements;
    plan = std::move(tries[best].plan);
    judged = tries[best].verdict;
    report(false);
  }
  report(true);
  return plan;
}

}  // namespace delta::planner
