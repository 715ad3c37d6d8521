#include "delta/fitting.hpp"

#include "common/parallel_for.hpp"
#include "common/stage_memo.hpp"
#include "delta/passes/discard_keeping.hpp"
#include "delta/passes/evictions/eviction_exchange.hpp"
#include "delta/portfolio.hpp"
#include "sim/stage_clock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace delta::planner {
namespace {

// The plans made in live bytes, kept for the second placement's fitting: a plan in live bytes
// does not depend on how the allocator will place the moved blocks, so the fitting with them
// packed judges the plans the fitting with whole pages made, where it tries the same live
// budgets (the same fractions and ways), rather than making them again. Nor does it depend on
// the threads that made it (PlanRequest::threads). Plans of one live budget share a stage memo
// (common/stage_memo.hpp): the way without state swaps only the link limits reuses what the
// other way's stages made before they read it.
// Past the time limit the fitting still tries the other placements, but only with the plans
// already made (made_only): judging a placement is one simulation, making a plan is a portfolio.
class LivePlans {
 public:
  // Thrown where made_only() is set and the plan asked for was not made.
  struct NotMade {};
  explicit LivePlans(LivePlanner plan) : plan_(plan) {}
  void set_made_only() { made_only_ = true; }
  plan::Plan operator()(const PlanRequest& live) {
    const Key key{live.budget_bytes, live.min_moved_bytes, live.state_swaps_within_link};
    PlanRequest memoised = live;
    {
      std::lock_guard lock(mutex_);
      if (auto it = made_.find(key); it != made_.end()) return it->second;
      if (made_only_) throw NotMade{};
      std::unique_ptr<StageMemo>& memo = memos_[{live.budget_bytes, live.min_moved_bytes}];
      if (!memo) memo = std::make_unique<StageMemo>();
      memoised.stage_memo = memo.get();
    }
    plan::Plan made = plan_(memoised);
    std::lock_guard lock(mutex_);
    return made_.try_emplace(key, std::move(made)).first->second;
  }

 private:
  using Key = std::tuple<std::uint64_t, std::uint64_t, bool>;
  LivePlanner plan_;
  bool made_only_ = false;  // set between fittings, never while plans are being made
  std::mutex mutex_;
  std::map<Key, plan::Plan> made_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::unique_ptr<StageMemo>> memos_;
};

// One fraction of the budget tried by fit_to_allocator: planned in live bytes, then
// placed by the allocator capped at the real budget.
struct FitTry {
  plan::Plan plan;
  SimulationResult placed;
  PlanRequest::FitAttempt attempt;
  std::int64_t live_time = 0;
  std::uint64_t min_moved_bytes = 0;    // as planned (try_fraction_and_pages may plan again so)
  bool state_swaps_within_link = true;
  bool discards_kept = false;  // placed only with the discards the live budget has room for kept
  bool not_made = false;     // past the time limit, a plan not made before (LivePlans::made_only)
  std::exception_ptr error;  // rethrown only where the fitting reaches this fraction
};

FitTry try_fraction(const PlanRequest& request, LivePlans& plan_live, double fraction, std::size_t threads,
                    std::uint64_t min_moved_bytes, bool state_swaps_within_link = true) {
  FitTry out;
  out.min_moved_bytes = min_moved_bytes;
  out.state_swaps_within_link = state_swaps_within_link;
  try {
    PlanRequest live = request;
    live.through_allocator = false;
    live.threads = threads;
    live.min_moved_bytes = std::max(request.min_moved_bytes, min_moved_bytes);
    live.state_swaps_within_link = request.state_swaps_within_link && state_swaps_within_link;
    live.budget_bytes = static_cast<std::uint64_t>(double(request.budget_bytes) * fraction);
    plan::Plan plan = plan_live(live);
    const bool fits_live = plan.predicted.feasible;
    out.live_time = plan.predicted.step_time_ns;
    plan.budget_bytes = request.budget_bytes;
    plan.budget_ratio = request.budget_ratio;
    // Under executor placement each block a plan only discards sits on pages of its own: with
    // those the live budget has room for kept resident, the allocator has fewer pages part
    // empty. But that room is gone at the ops they span, which the allocator may need more:
    // where it refuses that plan or places it only by waiting for evictions, the plan as made
    // is placed too, and the faster placed kept (the one with discards kept on a tie).
    std::optional<SimulationResult> placed;
    if (request.executor_placement && fits_live) {
      plan::Plan kept = keep_discards_with_room(live, plan);
      if (kept.decisions.size() != plan.decisions.size()) {
        SimulationResult placed_kept = judge(request, kept);
        if (placed_kept.feasible && placed_kept.step_time_ns <= out.live_time) {
          plan = std::move(kept);  // placed as fast as in live bytes: nothing to weigh it against
          placed = std::move(placed_kept);
          out.discards_kept = true;
        } else if (placed_kept.feasible) {
          SimulationResult as_made = judge(request, plan);
          const bool kept_faster = !as_made.feasible || placed_kept.step_time_ns <= as_made.step_time_ns;
          if (kept_faster) plan = std::move(kept);
          placed = kept_faster ? std::move(placed_kept) : std::move(as_made);
          out.discards_kept = kept_faster;
        }
      }
    }
    if (!placed) placed = judge(request, plan);
    out.attempt = {fraction, fits_live, {}};
    if (!placed->feasible && fits_live && placed->shortfall_bytes > 0) {
      // The allocator could not place one allocation: a few evictions of blocks idle across
      // that op (judged through the allocator, at most 1% of the step in replays) often make
      // room, where a smaller budget reshapes the whole plan. The repaired plan is slower than
      // in live bytes, so it is weighed against the next fraction's.
      plan::Plan repaired = plan;
      SimulationResult verdict = *placed;
      const double allowance = 0.01 * double(request.index->native_step_ns());
      PlanRequest repairing = request;  // its evictions kept off small blocks too
      repairing.min_moved_bytes = live.min_moved_bytes;
      if (repair_with_evictions(repairing, repaired, verdict, allowance, std::numeric_limits<std::int64_t>::max(), {})) {
        out.attempt.repaired_at = placed->error.substr(0, placed->error.find("): ") + 1);
        plan = std::move(repaired);
        *placed = verdict;
      }
    }
    plan.predicted.planned_fraction = fraction;
    out.plan = std::move(plan);
    out.placed = std::move(*placed);
  } catch (const LivePlans::NotMade&) {
    out.not_made = true;
    out.placed.feasible = false;
  } catch (...) {
    out.error = std::current_exception();
  }
  return out;
}

// The bytes of pages the blocks smaller than a page that `plan` moves leave unused, when each
// is on a page of its own.
std::uint64_t small_moves_waste(const TraceIndex& index, const plan::Plan& plan) {
  std::uint64_t waste = 0;
  for (const plan::BlockDecision& decision : plan.decisions) {
    if (!index.has_block(decision.block)) continue;
    const std::uint64_t size = index.block(index.block_index(decision.block)).size;
    if (size >= plan::kSwapGranularity) continue;
    if (std::any_of(decision.intervals.begin(), decision.intervals.end(), [](const plan::Interval& x) {
          return x.action == plan::Action::swap || x.action == plan::Action::regenerate || x.action == plan::Action::discard;
        }))
      waste += plan::kSwapGranularity - size;
  }
  return waste;
}

// Whether a try needs no other way of planning its fraction: placed (if only with waits or a
// repair), and, with `weigh_kept`, not placed below the whole budget only with its discards kept.
bool settled(const FitTry& t, bool weigh_kept, double fraction) {
  return !t.error && t.placed.feasible && !(weigh_kept && t.discards_kept && fraction < 1);
}

// The faster of two tries the allocator placed, `a` on a tie; `a` where `b` is not placed.
FitTry faster_placed(FitTry a, FitTry b) {
  if (b.error || !b.placed.feasible) return a;
  if (!a.error && a.placed.feasible && a.placed.step_time_ns <= b.placed.step_time_ns) return a;
  return b;
}

// One fraction, and under executor placement, where the allocator cannot place that plan, the
// same fraction planned again with blocks smaller than a page kept resident (the plan placed
// is kept): the executor puts a moved block on pages of its own, so each small block moved
// wastes most of a page while it is resident (gpt2-large at 0.7 of its peak: 290 gradients
// and other small blocks discarded, 1.1 GB of pages, so only 0.93 of the budget was placed,
// at 1.350 instead of 1.020). Second, so that plans the allocator places as they are stay as
// they were and cost no more time; and only where those pages come to 1% of the budget or
// more, the step from one fraction to the next (lstm's plans leave 0.2 to 0.6% so).
// With `weigh_kept` (the fraction the fitting takes, once known), a plan placed below the whole
// budget only with its discards kept resident is weighed against the ways tried where it is
// refused, which may be faster (GPT2-XL float32 at 0.6 of its peak, at 0.98 of the budget:
// 2.6589 placed so, 2.6435 with small blocks kept and state swaps only within the link);
// `known` is the first way's try, already made.
FitTry try_fraction_and_pages(const PlanRequest& request, LivePlans& plan_live, double fraction, std::size_t threads,
                              bool state_swaps_within_link, bool weigh_kept, const FitTry* known) {
  FitTry first = known ? *known : try_fraction(request, plan_live, fraction, threads, 0, state_swaps_within_link);
  if (!request.executor_placement || request.min_moved_bytes >= plan::kSwapGranularity) return first;
  if (settled(first, weigh_kept, fraction)) return first;
  if (!first.error && double(small_moves_waste(*request.index, first.plan)) < 0.01 * double(request.budget_bytes)) return first;
  return faster_placed(std::move(first),
                       try_fraction(request, plan_live, fraction, threads, plan::kSwapGranularity, state_swaps_within_link));
}

// One fraction as above; and where the allocator cannot place its plan and that plan swaps an
// optimizer's state before its first use, planned again without the state swaps that only the
// link limits (PlanRequest::state_swaps_within_link), kept where placed. Those plans keep the
// state away through the backward pass and pack the memory there tighter (GPT2-XL float32 at
// 0.4 of its peak, at 0.99 of the budget: 1.679 in live bytes but not placed, where the plan
// without them, 1.808, is placed).
FitTry try_fraction_and_pages(const PlanRequest& request, LivePlans& plan_live, double fraction, std::size_t threads,
                              bool weigh_kept = false, const FitTry* known = nullptr) {
  FitTry with = try_fraction_and_pages(request, plan_live, fraction, threads, request.state_swaps_within_link, weigh_kept, known);
  if (with.error || settled(with, weigh_kept, fraction) || !with.attempt.fits_live || !request.state_swaps_within_link ||
      !swaps_state_before_first_use(*request.index, with.plan))
    return with;
  return faster_placed(std::move(with), try_fraction_and_pages(request, plan_live, fraction, threads, false, weigh_kept, nullptr));
}

// The fitting below for one placement of the moved blocks (request.packed_moves).
plan::Plan fit_with_placement(const PlanRequest& request, LivePlans& plan_live);

}  // namespace

// Under executor placement, first with each moved block on whole pages of its own, then, unless
// that plan was placed at the whole budget, with the moved blocks packed side by side
// (Placement::packed), and packed in groups by when they are away (plan::packed_groups); the
// fastest plan placed is kept (on a tie, the one tried
// first), and the plan says which placement the executor must use (predicted.packed_moves,
// packed_groups). None wins everywhere: whole pages waste a block's last page while it is
// resident, packed pages hold a block away where it shares a page with one present, and groups
// each keep a partly used page of their own. Packed, gpt2-large bfloat16 at 0.6 of its peak
// runs at 2.09 against 2.21, grouped at 1.95; whole pages, the GPT-2 small step recorded on an
// H200 at 0.8 is placed at the whole budget (1.0722) where packed it is refused there by 21 MB
// of shared pages (1.0822 at 0.995); packed, resnet18 at 0.6 runs at 1.0843, grouped at 1.0870.
plan::Plan fit_to_allocator(const PlanRequest& request, LivePlanner plan) {
  StageScope stage("fitted to the allocator");
  LivePlans plan_live(plan);
  if (!request.executor_placement) return fit_with_placement(request, plan_live);
  PlanRequest whole = request;
  whole.packed_moves = whole.packed_groups = false;
  plan::Plan kept = fit_with_placement(whole, plan_live);
  if (kept.predicted.feasible && kept.predicted.planned_fraction >= 1.0) return kept;
  // Past the time limit the other placements are judged on the plans made so far: a few
  // simulations that often place a larger fraction (GPT2-XL bfloat16 at 0.7 of its peak: whole
  // pages 0.98 at 1.6038, packed in groups 0.99 at 1.5136 on the same plan).
  if (kept.predicted.feasible && past_deadline(request)) plan_live.set_made_only();
  const auto placement = [](const plan::Plan& p) {
    return !p.predicted.packed_moves ? "on pages of their own" : p.predicted.packed_groups ? "packed in groups" : "packed";
  };
  for (const bool groups : {false, true}) {
    if (kept.predicted.feasible && past_deadline(request)) plan_live.set_made_only();
    if (request.on_note)
      request.on_note(kept.predicted.feasible
                          ? fmt::format("moved blocks {}: placed for {:.4g} of the budget ({:.4f}); now {}", placement(kept),
                                        kept.predicted.planned_fraction, kept.predicted.overhead,
                                        groups ? "packed in groups" : "packed side by side")
                          : fmt::format("moved blocks {}: no plan placed; now {}", placement(kept),
                                        groups ? "packed in groups" : "packed side by side"));
    PlanRequest packed = request;
    packed.packed_moves = true;
    packed.packed_groups = groups;
    plan::Plan tried = fit_with_placement(packed, plan_live);
    if (tried.predicted.feasible && (!kept.predicted.feasible || tried.predicted.step_time_ns < kept.predicted.step_time_ns))
      kept = std::move(tried);
  }
  if (request.on_note && kept.predicted.feasible)
    request.on_note(fmt::format("kept the plan with the moved blocks {} ({:.4f})", placement(kept), kept.predicted.overhead));
  return kept;
}

namespace {

plan::Plan fit_with_placement(const PlanRequest& request, LivePlans& plan_live) {
  // Fragmentation: the caching allocator rounds and splits, so a plan that fits in live bytes
  // may not be placeable under the same cap. Plan for a slightly smaller live budget until the
  // allocator, capped at the real one, places every allocation. Feasibility is not monotone in
  // the fraction (densenet121 at 0.2: no plan fits live at 0.99, one at 0.81 fits the
  // allocator), so every fraction is tried until one is placed. A plan the allocator places
  // only by waiting for evictions in flight runs slower than in live bytes; then the next
  // fraction is tried too (GPT2-XL bfloat16 at batch 40 under an H200: 1.212 at 1.0 of the
  // budget, 1.195 at 0.99). Then the fractions between the first placed and the one above it
  // (fraction_steps_between), and the fastest plan placed is kept.
  static constexpr double kFractions[] = {1.0, 0.99, 0.98, 0.97, 0.95, 0.93, 0.90, 0.87, 0.84, 0.81, 0.78, 0.75};
  constexpr std::size_t kCount = std::size(kFractions);
  // Long traces get a small portfolio whose last stages polish two plans, then one, so one
  // plan keeps two cores only partly busy (GPT2-XL at 0.35 of its peak: 1.63 s on one thread,
  // 1.07 s on two), and there most budgets take two fractions or more (GPT2-XL at 0.8, 0.5
  // and 0.35 all do). So the next fraction is planned beside the current one, each on half
  // the threads, and the results are taken in order as if planned one by one: the plan is the
  // same, and a fraction planned for nothing costs only cores. Short traces' whole portfolio
  // keeps the cores busy, and half of them need one fraction (the DTR logs).
  const std::size_t threads = planner_threads(request.threads);
  const std::size_t width = threads >= 2 && ops_and_uses(*request.index) > kWholePortfolioOpsAndUses ? 2 : 1;
  // Tries `fractions` side by side, the threads shared out (an odd core to the first). With
  // `as`, each is planned only the way `as` was (its smallest block moved, its state swaps), not
  // again in the other ways where the allocator refuses it.
  const auto try_side_by_side = [&](const std::vector<double>& fractions, const FitTry* as = nullptr) {
    std::vector<FitTry> tries(fractions.size());
    parallel_for(fractions.size(), std::min(fractions.size(), threads), [&](std::size_t k) {
      const std::size_t share = std::max<std::size_t>(1, threads / fractions.size() + (k < threads % fractions.size() ? 1 : 0));
      tries[k] = as ? try_fraction(request, plan_live, fractions[k], share, as->min_moved_bytes, as->state_swaps_within_link)
                    : try_fraction_and_pages(request, plan_live, fractions[k], share);
    });
    return tries;
  };
  // Each try taken, in order: a fraction planned for nothing beside one is neither reported nor
  // its error raised, so that the attempts are those of one fraction at a time.
  const auto take_try = [&](const FitTry& t) {
    if (t.not_made) return;
    if (t.error) std::rethrow_exception(t.error);
    if (request.on_fit_attempt) request.on_fit_attempt(t.attempt, t.placed);
  };
  plan::Plan last;                // where none is placed: the diagnosis of a plan that fits live
  std::vector<FitTry> placed;     // the candidates, in the order tried
  std::size_t first_placed = kCount;
  bool done = false;
  for (std::size_t first = 0; first < kCount && !done; first += width) {
    const std::size_t take = std::min(width, kCount - first);
    std::vector<FitTry> tries = try_side_by_side({kFractions + first, kFractions + first + take});
    for (std::size_t k = 0; k < take && !done; ++k) {
      FitTry& t = tries[k];
      take_try(t);
      if (first_placed < kCount) {  // the second try after a plan placed with waits (made beside it, so taken)
        if (t.placed.feasible) placed.push_back(std::move(t));
        done = true;
      } else if (t.placed.feasible) {
        first_placed = first + k;
        // Placed only by waiting, or only with discards kept (room taken from the plan's ops
        // that a plan for less may not need): the next fraction's plan may be faster.
        done = (t.placed.step_time_ns <= t.live_time && !t.discards_kept) || past_deadline(request);
        placed.push_back(std::move(t));
      } else if (!t.not_made) {
        if (t.attempt.fits_live || t.attempt.fraction == kFractions[0]) last = std::move(t.plan);
      }
    }
  }
  if (placed.empty()) return last;
  // Past the time limit (PlanRequest::deadline) no other way or fraction is tried.
  const bool refining = !past_deadline(request);
  if (refining && placed[0].discards_kept && placed[0].attempt.fraction < 1 && placed[0].min_moved_bytes == 0 &&
      placed[0].state_swaps_within_link == request.state_swaps_within_link) {
    // The first fraction placed, placed only with discards kept: weighed against the other ways.
    FitTry weighed = try_fraction_and_pages(request, plan_live, placed[0].attempt.fraction, threads, true, &placed[0]);
    if (!weighed.error && weighed.placed.feasible) placed[0] = std::move(weighed);
  }
  // Where the plan placed runs at native speed, no plan between can be faster: not worth their
  // plans. Elsewhere the steps are tried, even where the plan refused above ran about as fast
  // in live bytes: whether a step is placed, and how fast, swings either way (GPT2-XL float32
  // at 0.8 of its peak: 1.00985 refused at 1, 1.01055 placed at 0.99, 1.00992 at 0.9975).
  const bool worth_steps = placed[0].placed.step_time_ns > request.index->native_step_ns();
  if (first_placed > 0 && worth_steps && refining) {
    // Planned as the first placed plan was: a way the allocator refused at the fraction above
    // is not tried again there, and each step costs one plan. Unless it was placed only with
    // discards kept, which a step between may not have room for: then every way, as above.
    std::vector<FitTry> between =
        try_side_by_side(fraction_steps_between(kFractions[first_placed - 1], kFractions[first_placed]),
                         placed[0].discards_kept ? nullptr : &placed[0]);
    for (FitTry& t : between) {
      take_try(t);
      if (t.placed.feasible) placed.push_back(std::move(t));
    }
  }
  std::size_t fastest = 0;  // on a tie the first placed, as planned before the steps between
  for (std::size_t k = 1; k < placed.size(); ++k)
    if (placed[k].placed.step_time_ns < placed[fastest].placed.step_time_ns) fastest = k;
  if (fastest != 0 && request.on_note)
    request.on_note(fmt::format("kept the plan for {:.4g} of the budget ({:.4f}), the fastest the allocator places; for {:.4g}: {:.4f}",
                                placed[fastest].attempt.fraction, placed[fastest].placed.overhead(),
                                placed[0].attempt.fraction, placed[0].placed.overhead()));
  return std::move(placed[fastest].plan);
}

}  // namespace

std::vector<double> fraction_steps_between(double refused, double placed) {
  std::vector<double> out;
  // Rounded to 1e-4 so that plans and reports carry the fraction as written (0.9925).
  for (int quarter = 3; quarter >= 1; --quarter)
    out.push_back(std::round((placed + (refused - placed) * quarter / 4.0) * 1e4) / 1e4);
  return out;
}

}  // namespace delta::planner
