#include "delta/search.hpp"

#include "bound/lower_bound.hpp"
#include "delta/bound_guided.hpp"
#include "delta/portfolio.hpp"

#include <optional>
#include <utility>

namespace delta::planner {
namespace {

// The local search ends after this many rounds without a faster plan.
constexpr std::size_t kSearchPatience = 100;
// The second start from the bound's optimum (PlanRequest::search_from_bound): the LP's time
// limit, and the swap refinement's tries in its polish.
constexpr int kBoundGuideSeconds = 60;
constexpr std::size_t kGuidedRefinements = 256;
// Traces up to this many ops and block uses together get the second start by default: there
// the LP and the second search take seconds (resnet32, 1,503: 4.6 to 11.7 s at 0.2 of its
// peak). Larger ones ask for it: on a resnet50 capture at batch 8 it took planning at 700 MiB
// to 54 s, and a resnet18 capture (2,142) plans many times over in a largest-batch search.
constexpr std::size_t kSecondStartOpsAndUses = 2'000;

}  // namespace

// Through the allocator, the tries are judged in live bytes under the budget the plan was made
// for (a fraction of the real one), which takes a fraction of the time, and each faster plan
// must then be placed by the allocator and run faster there too.
Search::Search(const PlanRequest& request, plan::Plan plan) : request_(request), plan_(std::move(plan)) {
  options_.rounds = request.search_rounds.value_or(portfolio_size(*request.index).search_rounds);
  options_.patience = request.search_patience.value_or(kSearchPatience);
  runs_ = options_.rounds != 0 && plan_.predicted.feasible;
  if (!runs_) return;
  live_ = request;
  live_.through_allocator = false;
  live_.budget_bytes = static_cast<std::uint64_t>(double(request.budget_bytes) * plan_.predicted.planned_fraction);
  if (request.through_allocator) options_.confirm_with = &request;
  fraction_ = plan_.predicted.planned_fraction;
  judged_ = judge(live_, plan_);
}

void Search::locally() {
  if (judged_.feasible) plan_ = search_locally(live_, std::move(plan_), judged_, options_);
}

// resnet32 at 0.2 of its peak: 1.1676 to 1.1663. Needs an LP solver. On longer traces the LP,
// the polish and the second search cost more than they gain (with it on for every trace, a
// resnet50 capture at batch 8 under 700 MiB took 54 s to plan, and the capture test's batch
// search ran past its 300 s limit).
void Search::from_bound(const Polish& polish_passes) {
  if (!judged_.feasible || !request_.search_from_bound.value_or(ops_and_uses(*request_.index) <= kSecondStartOpsAndUses))
    return;
  const OverheadBound bound = overhead_lower_bound(live_, kBoundGuideSeconds, false, IntegerSolver::automatic, false, false);
  if (bound.status != OverheadBound::Status::bounded || !bound.explanation) return;
  std::optional<plan::Plan> guided = follow_bound(live_, plan_, *bound.explanation);
  if (!guided) return;
  const PortfolioSize size = portfolio_size(*live_.index);
  SimulationResult verdict;
  plan::Plan candidate = polish(live_, std::move(*guided), verdict, polish_passes, pass_settings(size, kGuidedRefinements), true);
  if (!verdict.feasible) return;
  LocalSearchOptions search = options_;
  search.from_bound = true;
  candidate = search_locally(live_, std::move(candidate), verdict, search);
  if (!verdict.feasible) return;
  if (request_.through_allocator) {
    const SimulationResult placed = judge(request_, candidate), current = judge(request_, plan_);
    if (!placed.feasible || (current.feasible && placed.step_time_ns >= current.step_time_ns)) return;
  } else if (verdict.step_time_ns >= judged_.step_time_ns) {
    return;
  }
  plan_ = std::move(candidate);
  judged_ = verdict;
}

void Search::finish(std::span<const Pass> passes) {
  plan_.budget_bytes = request_.budget_bytes;
  if (judged_.feasible) {
    // Each change is small, and only short traces, those the search runs on, get here.
    SimulationResult verdict = judge(request_, plan_);
    if (verdict.feasible) run_once(passes, request_, plan_, verdict, PassSettings{});
  }
  plan_.budget_ratio = request_.budget_ratio;
  plan_.predicted.planned_fraction = fraction_;
  judge(request_, plan_);
}

}  // namespace delta::planner
