#include "delta/portfolio.hpp"

#include "common/parallel_for.hpp"
#include "delta/candidates.hpp"
#include "delta/hybrid/hybrid.hpp"
#include "delta/passes/evictions/swap_refinement.hpp"
#include "delta/passes/replays/revival_trim.hpp"
#include "delta/remat/remat.hpp"
#include "delta/sweep/sweep.hpp"
#include "sim/stage_clock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace delta::planner {

namespace {

// The local search's most rounds on traces that get the whole portfolio.
constexpr std::size_t kSearchRounds = 1000;

// The polish's tries per pass: about two million simulated ops per plan.
std::size_t polish_tries_for(const TraceIndex& index) {
  return std::clamp<std::size_t>(2'000'000 / std::max<std::size_t>(1, index.op_count()), 16, 256);
}

}  // namespace

// True when the plan swaps a block live before the step (an optimizer's state) over ops
// before its first use.
bool swaps_state_before_first_use(const TraceIndex& index, const plan::Plan& plan) {
  for (const plan::BlockDecision& decision : plan.decisions) {
    const BlockInfo& info = index.block(index.block_index(decision.block));
    if (!info.from_start || info.uses.empty()) continue;
    for (const plan::Interval& interval : decision.intervals)
      if (interval.action == plan::Action::swap && interval.release_after < info.uses.front()) return true;
  }
  return false;
}

std::size_t ops_and_uses(const TraceIndex& index) {
  std::size_t uses = 0;
  for (std::size_t op = 0; op < index.op_count(); ++op) uses += index.uses(op).size();
  return index.op_count() + uses;
}

// On short traces the exchange searches deep: trading one large regeneration for many small
// evictions (a 160 MB attention dropout output of the DTR transformer for its 10 MB layer-norm
// and projection outputs, which travel unseen over the copy lanes) takes up to a dozen
// evictions and fifty simulations (1.0661 to 1.0615 at 0.3, 1.0544 to 1.0491 at 0.4).
PortfolioSize portfolio_size(const TraceIndex& index) {
  const std::size_t ops = index.op_count();
  if (ops_and_uses(index) <= kWholePortfolioOpsAndUses) return {96, 96, 16, 0, 8, 3, 4, 64, 16, 50, 4, false, true, 64, kSearchRounds};
  if (ops <= 4'000) return {16, 2, 4, 1, 3, 1, 1, 16, 3, 12, 2, true, false, 0, 0};
  if (ops <= 25'000) return {8, 2, 0, 1, 2, 1, 1, 0, 3, 12, 1, false, false, 0, 0};
  return {2, 1, 0, 0, 2, 1, 1, 0, 3, 12, 1, false, false, 0, 0};
}

PassSettings pass_settings(const PortfolioSize& size, std::size_t max_tries) {
  PassSettings p;
  p.rounds = size.polish_rounds;
  p.pruning.max_tries = max_tries;
  p.refinement.max_tries = max_tries;
  p.sharing.max_tries = max_tries;
  p.exchange.max_tries = size.exchanges;
  p.exchange.max_added = size.exchange_depth;
  p.exchange.max_simulations = size.exchange_simulations;
  p.retention.repair = p.exchange;
  p.hidden_prunes = size.hidden_prunes;
  // Where the local search runs it makes such exchanges among its moves (a swap made a
  // regeneration, then settled), and its plans on the DTR logs swing more with a changed start
  // than the pass gains there: only traces without a search get the pass.
  p.sources.max_groups = size.search_rounds > 0 ? 0 : SourceSwapOptions{}.max_groups;
  return p;
}

Portfolio::Portfolio(const PlanRequest& request)
    : request_(request), memo_(request.stage_memo ? *request.stage_memo : own_memo_), size_(portfolio_size(*request.index)),
      threads_(planner_threads(request.threads)),
      native_(native_step_ns(*request.index, simulation_options(request))), polishing_(pass_settings(size_, polish_tries_for(*request.index))),
      best_time_(std::numeric_limits<std::int64_t>::max()) {}

void Portfolio::consider(const SimulationResult& result, const plan::Plan& plan, Family family) {
  if (!result.feasible) return;
  auto& list = finalists_[family];
  list.emplace_back(result.step_time_ns, plan);
  std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (list.size() > size_.finalists) list.pop_back();
}

// A feasible candidate: a finalist of its family, and the best plan so far when faster (or
// when the best so far is infeasible).
void Portfolio::take(const SimulationResult& result, plan::Plan& plan, Family family) {
  consider(result, plan, family);
  if (best_time_ == std::numeric_limits<std::int64_t>::max() || result.step_time_ns < best_time_) {
    best_time_ = result.step_time_ns;
    best_ = std::move(plan);
    have_any_ = true;
  }
}

// The sweep books transfers on the native timeline, which stalls shift, and the exchange rate
// between exposed transfer time and compute is uncertain. So it plans with a few settings,
// each also for a slightly tighter budget, and the simulator judges which is fastest.
void Portfolio::sweep() {
  StageScope stage("the sweep");
  for (const SweepSetting& setting : kSweepSettings) {
    if (have_any_ && best_time_ <= native_) break;
    sweep_tightening(request_, setting, StateSwaps::any, [&](plan::Plan& plan, const SimulationResult& result) {
      consider(result, plan, sweep_family);
      if (!have_any_ || (result.feasible && result.step_time_ns < best_time_)) {
        if (result.feasible) best_time_ = result.step_time_ns;
        best_ = std::move(plan);
        have_any_ = true;
      }
    });
  }
}

// Regeneration-only plans from an offline replay of the step (chains of any length), scored
// with the future known and, as DTR does online, with staleness. They cannot beat a plan that
// already runs at native speed (within 0.1%).
void Portfolio::rematerialise() {
  StageScope stage("the offline rematerialisation");
  if (have_any_ && best_time_ <= native_ + native_ / 1000) return;
  if (have_any_ && past_deadline(request_)) return;  // past the time limit: the sweeps' plans are candidates enough
  if (regeneration_alone_cannot_fit(request_) || offline_remat_cannot_fit(request_)) return;
  const std::vector<RematOptions> settings = remat_settings(size_.remat_settings, size_.revive_settings, size_.sibling_settings,
                                                            size_.shared_input_settings, size_.restarts);
  std::vector<std::pair<plan::Plan, SimulationResult>> replays(settings.size());
  parallel_for(settings.size(), threads_, [&](std::size_t k) {
    replays[k].first = plan_offline_remat(request_, settings[k]);
    trim_revivals(*request_.index, replays[k].first);
    replays[k].second = judge(request_, replays[k].first);
  });
  for (std::size_t k = 0; k < replays.size(); ++k) {  // in the settings' order, as if run one by one
    auto& [plan, result] = replays[k];
    if (!result.feasible) continue;
    regeneration_fits_ = true;
    take(result, plan,
         settings[k].dropped_input_weight < 1 ? shared_input_family
         : settings[k].sibling_window >= 0 ? sibling_family
         : !settings[k].revive_inputs ? remat_family
         : settings[k].share_revived_cost ? shared_revive_family : revive_family);
  }
}

// Each setting is one rematerialisation (two, to find where it stops fitting), one sweep and
// one simulation. A head start lets the rematerialisation hold more from the step's first ops
// on, for a wait at the start; the state swaps the sweep takes are any that rank first, or
// only those the link carries in time (StateSwaps): each wins somewhere (GPT2-XL bfloat16 at
// 0.6 of its peak, in live bytes: 3.406 with none and any state swaps, 3.417 with a 1/32 head
// start; gpt2-large float32 at 0.6: 1.831 with none and state swaps within the link; BERT-
// Large at 0.6: 2.009 with a 1/32 head start, within the link).
void Portfolio::rebuild_beside_swaps() {
  StageScope stage("activations rebuilt, state swapped");
  if (regeneration_fits_ || (have_any_ && best_time_ <= native_ + native_ / 1000)) return;
  if (have_any_ && past_deadline(request_)) return;
  const RematOptions remat = remat_settings(1, 0, 0, 0, size_.restarts).front();
  std::vector<HybridOptions> settings;
  for (const double head_start : {0.0, 1.0 / 32, 1.0 / 16, 1.0 / 8})
    for (const StateSwaps kind : {StateSwaps::any, StateSwaps::within_link}) {
      HybridOptions options;
      options.remat = remat;
      options.head_start_bytes = static_cast<std::uint64_t>(head_start * double(request_.budget_bytes));
      options.state_swaps = kind;
      settings.push_back(options);
    }
  std::vector<std::pair<plan::Plan, SimulationResult>> plans(settings.size());
  parallel_for(settings.size(), threads_, [&](std::size_t k) {
    plans[k].first = plan_rebuilds_then_swaps(request_, settings[k]);
    plans[k].second = judge(request_, plans[k].first);
  });
  for (auto& [plan, result] : plans)  // in the settings' order, as if run one by one
    if (result.feasible) take(result, plan, hybrid_family);
}

// Each try is one simulation: the polish gets about two million simulated ops per plan. The
// finalists, up to 18 plans on long traces, get fewer on traces with many uses per op: each
// simulation walks the uses too, and about 2.4 million ops and uses per plan keeps all 256
// tries on the DTR logs but LSTM, while GPT2-XL (3,310 ops, 21,400 uses) gets 97, where 256
// were most of its planning time.
void Portfolio::refine_finalists() {
  StageScope stage("the finalists refined");
  const std::size_t walked = ops_and_uses(*request_.index);
  SwapRefinementOptions refinement;
  refinement.max_tries = std::clamp<std::size_t>(2'400'000 / std::max<std::size_t>(1, walked), 16, polish_tries_for(*request_.index));
  // The finalists' refinement books copies from the releases: with early copies it steers
  // the polish down paths that end slower (densenet121 at 0.5: 1.0808 against 1.0776).
  refinement.early_copies = false;
  for (int f = 0; f < families; ++f)
    for (auto& finalist : finalists_[f]) {
      refined_plans_.push_back(&finalist.second);
      family_of_.push_back(f);
    }
  refined_.resize(refined_plans_.size());
  parallel_for(refined_plans_.size(), threads_, [&](std::size_t k) {
    plan::Plan& plan = *refined_plans_[k];
    refined_[k] = judge(request_, plan);
    if (refined_[k].regenerations > 0 && !past_deadline(request_)) plan = refine_with_swaps(request_, std::move(plan), refined_[k], refinement);
  });
}

Judged Portfolio::polish_fastest(const Polish& polish_passes) {
  StageScope stage("the fastest polished");
  // The fastest few, each of a different step time (near-identical plans polish alike), are
  // polished; the fastest after polishing wins.
  struct Ranked {
    std::int64_t time;
    plan::Plan* plan;
    int family;  // -1: the fastest before refinement
  };
  std::vector<Ranked> ranked;
  if (have_any_) ranked.push_back({best_time_, &best_, -1});
  for (std::size_t k = 0; k < refined_plans_.size(); ++k)
    if (refined_[k].feasible) ranked.push_back({refined_[k].step_time_ns, refined_plans_[k], family_of_[k]});
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) { return a.time < b.time; });
  std::vector<plan::Plan*> to_polish;
  std::vector<bool> family_taken(families + 1, false);
  std::vector<std::int64_t> times;  // of the plans taken: each time once
  for (int pass = size_.polish_across_families ? 0 : 1; pass < 2; ++pass)
    for (const Ranked& r : ranked) {
      if (to_polish.size() == size_.polished) break;
      if (std::find(times.begin(), times.end(), r.time) != times.end()) continue;
      if (pass == 0 && family_taken[r.family + 1]) continue;
      family_taken[r.family + 1] = true;
      to_polish.push_back(r.plan);
      times.push_back(r.time);
    }
  if (to_polish.empty()) {
    Judged chosen{std::move(best_), {}};
    chosen.verdict = judge(request_, chosen.plan);
    return chosen;
  }
  // Where the whole portfolio runs, the two fastest plans are polished twice: with the passes'
  // new swaps copying from their blocks' last writes, and copying from their releases. Earlier
  // copies leave the lanes more room before the peak, but reorder them, and the polish follows
  // a different path either way (resnet32 at 0.5: 1.0602 with release copies, 1.0579 with
  // early ones; densenet121 at 0.5: 1.0776 and 1.0866). On the DTR logs no slower plan won
  // the second way, so the others are polished once.
  constexpr std::size_t kBothWays = 2;
  std::vector<std::pair<std::size_t, bool>> jobs;  // (plan, early copies)
  for (std::size_t k = 0; k < to_polish.size(); ++k) {
    jobs.emplace_back(k, true);
    if (size_.both_copy_models && k < kBothWays) jobs.emplace_back(k, false);
  }
  std::vector<plan::Plan> polished(jobs.size());
  std::vector<SimulationResult> verdicts(jobs.size());
  parallel_for(jobs.size(), threads_, [&](std::size_t job) {
    const auto [k, early_copies] = jobs[job];
    polished[job] = polish(request_, *to_polish[k], verdicts[job], polish_passes, polishing_, early_copies);
  });
  std::size_t winner = 0;
  for (std::size_t k = 1; k < polished.size(); ++k)
    if (verdicts[k].feasible && (!verdicts[winner].feasible || verdicts[k].step_time_ns < verdicts[winner].step_time_ns)) winner = k;
  return {std::move(polished[winner]), verdicts[winner]};
}

// The sweep swaps an optimizer's state over the ops before its first use. Where the link is
// what limits a plan, those copies take the room that activations need, and the portfolio
// built on them lands slower (GPT2-XL at 0.35 of its peak: 2.58 against 2.49 without them).
// Offered to the portfolio itself, plans without them would change its finalists and what it
// polishes everywhere; as a chance of their own, where the portfolio's plan has such swaps,
// they can only make it faster in live bytes: the fastest such plan, polished, replaces
// `chosen` when faster. (Where it has none, the chance found 1.0053 against 1.0056 on GPT2-XL
// at 0.8 and nothing at 0.5, for a fifth more planning time.) Between none and as many as rank
// first lie the state swaps the link carries in time (StateSwaps::within_link): the state idle
// longest goes first, as far as its copies out are done by the op that needs the room, and
// activations are rebuilt and parameters swapped for the rest. On gpt2-large at 0.6 of its
// peak that keeps `exp_avg_sq` away from the forward to its first update, where the optimizer
// must bring it back anyway: 2.177 without state swaps, 2.048 with these. Each kind's fastest
// sweep is polished, and the faster kept.
bool Portfolio::wants_fewer_state_swaps(const Judged& chosen) const {
  const TraceIndex& index = *request_.index;
  if (chosen.verdict.feasible) return swaps_state_before_first_use(index, chosen.plan) && chosen.verdict.step_time_ns > native_;
  // Where no such state exists, the sweep without its swaps is the sweep the portfolio ran.
  return std::any_of(index.blocks().begin(), index.blocks().end(), idle_before_first_use);
}

std::vector<StateSwaps> Portfolio::fewer_state_swap_kinds() const {
  std::vector<StateSwaps> kinds = {StateSwaps::none};
  if (request_.state_swaps_within_link) kinds.push_back(StateSwaps::within_link);
  return kinds;
}

void Portfolio::fewer_state_swaps(const Polish& polish_passes, Judged& chosen) const {
  StageScope stage("sweeps with fewer state swaps");
  if (!wants_fewer_state_swaps(chosen) || past_limit_with(chosen)) return;
  for (const StateSwaps kind : fewer_state_swap_kinds()) polish_fastest_sweep(request_, {&kind, 1}, polish_passes, chosen);
}

void Portfolio::polish_fastest_sweep(const PlanRequest& request, std::span<const StateSwaps> kinds,
                                     const Polish& polish_passes, Judged& chosen) const {
  Judged polished = polished_fastest_sweep(request, kinds, polish_passes);
  if (polished.verdict.feasible && (!chosen.verdict.feasible || polished.verdict.step_time_ns < chosen.verdict.step_time_ns))
    chosen = std::move(polished);
}

Judged Portfolio::polished_fastest_sweep(const PlanRequest& request, std::span<const StateSwaps> kinds,
                                         const Polish& polish_passes) const {
  const auto make = [&]() -> StageMemo::Made {
    StageScope made("a sweep polished");
    plan::Plan start;
    SimulationResult start_verdict;
    start_verdict.feasible = false;
    for (const StateSwaps kind : kinds)
      for (const SweepSetting& setting : kSweepSettings)
        sweep_tightening(request, setting, kind, [&](plan::Plan& plan, const SimulationResult& result) {
          if (result.feasible && (!start_verdict.feasible || result.step_time_ns < start_verdict.step_time_ns)) {
            start = std::move(plan);
            start_verdict = result;
          }
        });
    if (!start_verdict.feasible) return {std::move(start), start_verdict};
    SimulationResult polished_verdict;
    plan::Plan polished = polish(request, std::move(start), polished_verdict, polish_passes, polishing_, true);
    return {std::move(polished), polished_verdict};
  };
  // The sweeps also read the kinds of state swaps.
  std::string stage = "polished fastest sweep with state swaps";
  for (const StateSwaps kind : kinds) stage += fmt::format(" {}", static_cast<int>(kind));
  auto [plan, verdict] = memo_.get(stage_key(stage, request), make);
  return {std::move(plan), verdict};
}

// On state-heavy transformer steps on an H200 (a short step, a slow link against it) the
// sweep ranks parameters first: each is idle from its forward read to its backward one, the
// longest gaps of the step. But each swap crosses the link twice, and the backward pass
// cannot bring them all back in time: GPT2-XL in bfloat16 (batch 2, sequence 512) at 0.7 of
// its peak swapped 2.5 GB of parameters and ran at 2.870 in live bytes, 1.667 with every
// parameter resident (the lower bound: 1.078, rebuilding activations instead). Where the
// state and activations alone do not quite make room, those sweeps swap a parameter at the
// ops nothing else frees (GPT2-XL float32 at 0.594: 2.669, where all parameters moving gave
// 3.129).
void Portfolio::fewer_parameter_swaps(const Polish& polish_passes, Judged& chosen) const {
  StageScope stage("sweeps with every parameter resident");
  const TraceIndex& index = *request_.index;
  if (!request_.move_parameters || past_limit_with(chosen)) return;
  if (chosen.verdict.feasible) {
    if (chosen.verdict.step_time_ns <= native_) return;
    const bool moves_parameters = std::any_of(chosen.plan.decisions.begin(), chosen.plan.decisions.end(), [&](const plan::BlockDecision& d) {
      return index.block(index.block_index(d.block)).category == trace::Category::parameter;
    });
    if (!moves_parameters) return;
  }
  PlanRequest resident = request_;
  resident.move_parameters = false;
  const StateSwaps kinds[] = {StateSwaps::any, request_.state_swaps_within_link ? StateSwaps::within_link : StateSwaps::none};
  polish_fastest_sweep(resident, kinds, polish_passes, chosen);
}

// fewer_state_swaps polishes two sweeps one after another, each on the portfolio's threads but
// with little to share on long traces (GPT2-XL: one core of two busy). Made side by side
// first, into the stage memo the stage then takes them from, they take the time of the longer.
// Not fewer_parameter_swaps' sweep: whether it is asked for is known only after
// fewer_state_swaps, and made for nothing beside the others it cost GPT2-XL's fitted plans 2 to
// 6% of their time.
void Portfolio::polish_alternatives_side_by_side(const Polish& polish_passes, const Judged& chosen) const {
  StageScope stage("sweeps with fewer state swaps, side by side");
  if (threads_ < 2 || !wants_fewer_state_swaps(chosen) || past_limit_with(chosen)) return;
  const std::vector<StateSwaps> kinds = fewer_state_swap_kinds();
  if (kinds.size() < 2) return;
  parallel_for(kinds.size(), threads_, [&](std::size_t k) { polished_fastest_sweep(request_, {&kinds[k], 1}, polish_passes); });
}

}  // namespace delta::planner
