// DELTA's planner as users call it: a portfolio of candidate plans (the sweep under several
// settings and rules, the offline rematerialization under a grid of settings), each judged by
// the simulator, the fastest few refined with swaps; the fastest plan wins, pruned of the
// evictions it does not need. With fragmentation counted, it aims below the budget until the
// caching allocator places the plan under the real one.
#include "bound/lower_bound.hpp"
#include "common/early_copies.hpp"
#include "common/parallel_for.hpp"
#include "delta/bound_guided.hpp"
#include "delta/local_search.hpp"
#include "delta/passes/eviction_exchange.hpp"
#include "delta/passes/interval_pruning.hpp"
#include "delta/passes/lane_head_exchange.hpp"
#include "delta/passes/replay_sharing.hpp"
#include "delta/passes/revival_retention.hpp"
#include "delta/passes/revival_trim.hpp"
#include "delta/passes/swap_refinement.hpp"
#include "delta/pipeline.hpp"
#include "delta/remat/remat.hpp"
#include "delta/sweep/sweep.hpp"

#include <algorithm>
#include <exception>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace delta::planner {

namespace {

// How much of the portfolio a trace gets: the offline replay's settings tried and the plans
// of each family refined. Planning time grows with the trace, so long traces get a prefix.
// Every simulation walks the ops and their block uses, so the whole portfolio goes to traces
// with at most 12,000 of both together (the DTR logs but LSTM: densenet121 has 2,072 ops and
// 7,036 uses, the transformer 2,821 and 5,525); GPT2-large and GPT2-XL, with three times as many
// uses per op (2,496 ops and 16,100 uses; 3,310 and 21,400), would take 8 s and more, and get
// the second row (GPT2-XL plans in under two seconds at 0.8, 0.5 and 0.35 of its peak, live
// or fitted, on two cores).
// The local search on the chosen plan (short traces): at most kSearchRounds rounds of two
// perturbations each, ending after kSearchPatience rounds without a faster plan.
constexpr std::size_t kSearchRounds = 1000, kSearchPatience = 100;
// The second start from the bound's optimum (PlanRequest::search_from_bound): the LP's time
// limit, and the swap refinement's tries in its polish.
constexpr int kBoundGuideSeconds = 60;
constexpr std::size_t kGuidedRefinements = 256;
// Traces up to this many ops and block uses together get the second start by default: there
// the LP and the second search take seconds (resnet32, 1,503: 4.6 to 11.7 s at 0.2 of its
// peak). Larger ones ask for it: on a resnet50 capture at batch 8 it took planning at 700 MiB
// to 54 s, and a resnet18 capture (2,142) plans many times over in a largest-batch search.
constexpr std::size_t kSecondStartOpsAndUses = 2'000;

struct PortfolioSize {
  std::size_t remat_settings;
  std::size_t revive_settings;  // of the offline replay again with revivals
  std::size_t sibling_settings;  // of the offline replay again with siblings rebuilt together (plain and with revivals)
  std::size_t shared_input_settings;  // plain settings again with dropped inputs' rebuilds counted as shared (4 each)
  std::size_t finalists;
  int polish_rounds;         // of pruning and swap refinement on the winner
  std::size_t restarts;      // of each offline replay that strands an op
  std::size_t exchanges;     // regenerations the polish tries to trade for cheaper evictions
  std::size_t exchange_depth;        // evictions added in place of one
  std::size_t exchange_simulations;  // per regeneration taken out
  std::size_t polished;      // fastest plans polished (the fastest after polishing wins)
  // Polish the fastest plan of each family first (then the fastest left): where only a couple
  // are polished, a faster plan of one family can polish worse than another family's.
  bool polish_across_families;
  bool both_copy_models;     // polish each plan with early copies and with copies at the release
  std::size_t hidden_prunes;  // evictions pruned after each hidden swap tried (0: no hidden swaps)
  std::size_t search_rounds;  // most rounds of local search on the chosen plan (0: none)
};

// Traces up to this many ops and block uses together get the whole portfolio (below).
constexpr std::size_t kWholePortfolioOpsAndUses = 12'000;

// What sizes the planner's effort: ops and block uses together.
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

// The offline replay's settings, most useful first. Restored replay inputs stay resident only
// with `restore_headroom` sizes of room left for temporaries (little room rebuilds less at
// loose budgets, more fails less at tight ones); a drop's cost looks `rebuild_depth` levels
// through inputs that are gone as well (shallow judges loose budgets better, deep the long
// chains of tight ones) and, with `children` weight, at the dropped blocks made from it (what
// keeps tight budgets from stranding long rebuilds: densenet121 at 0.2, 1.91 to 1.48); and
// the weight of time against cost in the drop score shifts between models.
std::vector<RematOptions> remat_settings(std::size_t count, std::size_t revived, std::size_t siblings, std::size_t shared_inputs,
                                        std::size_t restarts) {
  // Siblings are rebuilt together when needed within 0.5% of the step of each other (the
  // DTR transformer's dropout output and mask: four ops apart).
  constexpr double kSiblingWindow = 0.005;
  struct Setting {
    RematScore score;
    double headroom;
    int depth;
    double weight;
    double children = 0;
    bool operator==(const Setting&) const = default;
  };
  constexpr RematScore next = RematScore::until_next_use, last = RematScore::since_last_use;
  std::vector<Setting> settings = {{last, 0, 1, 0.5}, {next, 0, 8, 0.5}, {last, 0, 8, 0.5}, {last, 0, 1, 2}, {next, 2, 8, 0.5},
                                   {last, 4, 8, 2},   {next, 0, 1, 1},   {last, 8, 8, 1},   {next, 4, 1, 2}};
  const std::vector<Setting> first(settings);
  for (double children : {32.0, 8.0})
    for (Setting x : first) {
      x.children = children;
      settings.push_back(x);
    }
  for (RematScore score : {next, last})
    for (double headroom : {0.0, 2.0, 4.0, 8.0})
      for (int depth : {1, 8})
        for (double weight : {0.5, 1.0, 2.0})
          for (double children : {0.0, 32.0, 8.0}) {
            const Setting x{score, headroom, depth, weight, children};
            if (std::find(settings.begin(), settings.end(), x) == settings.end()) settings.push_back(x);
          }
  std::vector<RematOptions> out;
  for (std::size_t k = 0; k < std::min(count, settings.size()); ++k) {
    RematOptions options;
    options.score = settings[k].score;
    options.restore_headroom = settings[k].headroom;
    options.rebuild_depth = settings[k].depth;
    options.distance_weight = settings[k].weight;
    options.children_weight = settings[k].children;
    // Plans again with what stranded an op pinned: most failing settings that can be rescued
    // are within four (unet at 0.3: 1.80 to 1.51).
    options.max_restarts = restarts;
    out.push_back(options);
  }
  // The most useful settings again with freed inputs revived rather than rebuilt in every
  // replay, each with the revived inputs' cost shared among the blocks made from them and
  // without (densenet121 at 0.5: 1.123 to 1.093 and 1.100; at 0.3: 1.244 to 1.203 and 1.195).
  // Elsewhere revivals hold memory that drops then pay for, so the plain settings run too.
  const std::size_t plain = out.size();
  for (std::size_t k = 0; k < std::min(revived, 2 * plain); ++k) {
    RematOptions options = out[k / 2];
    options.revive_inputs = true;
    options.share_revived_cost = k % 2 == 0;
    out.push_back(options);
  }
  // The most useful settings, plain and with revivals, again with siblings rebuilt together:
  // a dropout's mask comes back with its output when both are dropped (the DTR transformer at
  // 0.4: 1.0491 to 1.0449; GPT2-XL at 0.5, fitted: 1.044 to 1.036). Elsewhere (resnet32's
  // batch norm writes its statistics beside its output) the siblings hold memory that other
  // drops then pay for, so these are a family of their own, and where few plans are polished
  // the best of each family is (a faster sibling plan can polish worse: GPT2-large bfloat16
  // at batch 74 under an H200, 1.198 with one plan polished, 1.200 with the sibling plan
  // alone).
  const std::size_t revivals = out.size() - plain;
  for (std::size_t k = 0; k < std::min(siblings, plain); ++k)
    for (const std::size_t from : {k, plain + k}) {
      if (from >= plain && from - plain >= revivals) continue;
      RematOptions options = out[from];
      options.sibling_window = kSiblingWindow;
      out.push_back(options);
    }
  // Plain settings again, without siblings and with, counting a dropped input's rebuild as
  // shared with the blocks that need it, not at all or at half (delta/remat/remat.hpp): on GPT-2 in
  // bfloat16 they drop the GELU's pieces with its first projection rather than attention
  // scores (GPT2-large at batch 56 under an H200, fitted: 1.148 to 1.131, from the weight 0;
  // at batch 80, 1.211 to 1.199, from the weight 0.5). A family of their own again. The third
  // setting first: it scores by staleness and looks 8 levels deep, where sharing matters most
  // (1.131 at batch 56, against 1.136 to 1.148 from each of the others of the first six at
  // weight 0); then the others in their order. The short traces do without: the DTR logs gain
  // nothing, and resnet32 at 0.2 polishes to 1.1685 from the extra finalists rather than
  // 1.1676.
  std::vector<std::size_t> order;
  if (plain > 2) order.push_back(2);
  for (std::size_t k = 0; k < plain; ++k)
    if (k != 2) order.push_back(k);
  for (std::size_t k = 0; k < std::min(shared_inputs, plain); ++k)
    for (double weight : {0.0, 0.5}) {
      RematOptions options = out[order[k]];
      options.dropped_input_weight = weight;
      out.push_back(options);
      options.sibling_window = kSiblingWindow;
      out.push_back(options);
    }
  return out;
}

// The passes that polish a finished plan, sized for the trace.
struct Polishing {
  IntervalPruningOptions pruning;
  SwapRefinementOptions refinement;
  ReplaySharingOptions sharing;
  EvictionExchangeOptions exchange;
  RevivalRetentionOptions retention;
};

Polishing polishing_for(const PortfolioSize& size, std::size_t max_tries) {
  Polishing p;
  p.pruning.max_tries = max_tries;
  p.refinement.max_tries = max_tries;
  p.sharing.max_tries = max_tries;
  p.exchange.max_tries = size.exchanges;
  p.exchange.max_added = size.exchange_depth;
  p.exchange.max_simulations = size.exchange_simulations;
  p.retention.repair = p.exchange;
  return p;
}

// Greedy choices leave some evictions redundant once others cover the same ops. What pruning
// frees (memory, copy-lane time) can let more regenerations travel as swaps, so the passes
// alternate while the step gets faster (a few rounds at most). `judged` becomes the result's
// simulation.
plan::Plan polish(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const PortfolioSize& size,
                  Polishing passes, bool early_copies) {
  passes.refinement.early_copies = early_copies;
  passes.exchange.early_copies = early_copies;
  passes.retention.repair.early_copies = early_copies;
  judged = judge(request, plan);
  for (int round = 0; round < size.polish_rounds && judged.feasible; ++round) {
    const std::int64_t before = judged.step_time_ns;
    plan::Plan untrimmed = plan;
    if (trim_revivals(*request.index, plan) > 0) {
      SimulationResult trimmed = judge(request, plan);
      if (trimmed.feasible) judged = trimmed;
      else plan = std::move(untrimmed);  // never expected: trimming only frees what nothing reads
    }
    plan = prune_intervals(request, std::move(plan), judged, passes.pruning);
    if (judged.regenerations > 0) plan = refine_with_swaps(request, std::move(plan), judged, passes.refinement);
    if (judged.regenerations > 0 && passes.exchange.max_tries > 0)
      plan = exchange_regenerations(request, std::move(plan), judged, passes.exchange);
    if (judged.stall_ns > 0) plan = relieve_stalls(request, std::move(plan), judged, passes.exchange);
    if (judged.regenerations + judged.revivals > 1) plan = share_replays(request, std::move(plan), judged, passes.sharing);
    if (judged.revivals > 0) plan = retain_revived_blocks(request, std::move(plan), judged, passes.retention);
    if (judged.step_time_ns >= before) break;
  }
  // Last, memory for nothing: hidden swaps of blocks idle where the plan is fullest, each with
  // the evictions it makes redundant pruned, then the stalls and exchanges that opens. In
  // every polish round instead, they steer the passes down other paths (unet at 0.3: 1.2606
  // against 1.2729).
  if (size.hidden_prunes > 0 && judged.feasible) {
    for (int round = 0; round < size.polish_rounds; ++round) {
      const std::int64_t before = judged.step_time_ns;
      plan = swap_hidden_and_prune(request, std::move(plan), judged, passes.exchange, 4, size.hidden_prunes);
      if (judged.step_time_ns >= before) break;
      if (judged.stall_ns > 0) plan = relieve_stalls(request, std::move(plan), judged, passes.exchange);
      if (judged.regenerations > 0) plan = exchange_regenerations(request, std::move(plan), judged, passes.exchange);
    }
  }
  start_copies_early_if_faster(request, plan, judged);
  return plan;
}

// Short regeneration chains first; long ones (up to kLongChain ops) free more at tight
// budgets but tie up more inputs, so they are a second try rather than the default.
// Regeneration alone is the last try: where transfers cannot hide (fast compute, slow
// link), swaps that look cheap hold memory through their copies and cost more regeneration
// elsewhere.
constexpr std::size_t kLongChain = 64;
// The rules of two baselines that share the sweep join as candidates too: on some models
// their simple choices (swap whatever hides; largest stale block first) land better.
struct SweepSetting {
  std::size_t chain;
  double factor;
  bool swap;
  Policy policy = Policy::delta;
};
constexpr SweepSetting kSweepSettings[] = {{4, 1.0, true}, {4, 3.0, true}, {4, 10.0, true}, {kLongChain, 1.0, true},
                                           {kLongChain, 3.0, true}, {kLongChain, 10.0, true}, {4, 1.0, false},
                                           {kLongChain, 1.0, false}, {4, 1.0, true, Policy::capuchin},
                                           {4, 1.0, true, Policy::delta_public}};

// One sweep setting, planned for the budget and, while the simulator finds its plan
// infeasible, for 3% less twice more; `visit(plan, verdict)` sees each plan, judged at the
// real budget.
template <typename Visit>
void sweep_tightening(const PlanRequest& request, const SweepSetting& setting, bool evict_state, Visit&& visit) {
  DeltaOptions options;
  options.discard_dead = true;
  options.exposed_swap_factor = setting.factor;
  options.max_chain = setting.chain;
  options.allow_swap = setting.swap;
  options.policy = setting.policy;
  options.hide_prefetch = setting.policy != Policy::delta_public;  // that rule fetches at the use
  options.evict_state_before_first_use = evict_state;
  PlanRequest tighter = request;
  for (int round = 0; round < 3; ++round) {
    plan::Plan plan = plan_with_sweep(tighter, options);
    plan.budget_bytes = request.budget_bytes;
    plan.budget_ratio = request.budget_ratio;
    SimulationResult result = judge(request, plan);
    const bool feasible = result.feasible;
    visit(plan, result);
    if (feasible) break;
    tighter.budget_bytes = static_cast<std::uint64_t>(double(tighter.budget_bytes) * 0.97);
  }
}

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

// The sweep swaps an optimizer's state over the ops before its first use. Where the link is
// what limits a plan, those copies take the room that activations need, and the portfolio
// built on them lands slower (GPT2-XL at 0.35 of its peak: 2.58 against 2.49 without them).
// Offered to the portfolio itself, plans without them would change its finalists and what it
// polishes everywhere; as a chance of their own, where the portfolio's plan has such swaps,
// they can only make it faster in live bytes: the fastest such plan, polished, replaces
// `chosen` when faster. (Where it has none, the chance found 1.0053 against 1.0056 on GPT2-XL
// at 0.8 and nothing at 0.5, for a fifth more planning time.)
void try_without_state_swaps(const PlanRequest& request, const PortfolioSize& size, const Polishing& polishing,
                             plan::Plan& chosen, SimulationResult& verdict) {
  const TraceIndex& index = *request.index;
  if (verdict.feasible) {
    if (!swaps_state_before_first_use(index, chosen) || verdict.step_time_ns <= index.native_step_ns()) return;
  } else if (std::none_of(index.blocks().begin(), index.blocks().end(), idle_before_first_use)) {
    return;  // no such state: the sweep without its swaps is the sweep the portfolio ran
  }
  plan::Plan start;
  SimulationResult start_verdict;
  start_verdict.feasible = false;
  for (const SweepSetting& setting : kSweepSettings)
    sweep_tightening(request, setting, false, [&](plan::Plan& plan, const SimulationResult& result) {
      if (result.feasible && (!start_verdict.feasible || result.step_time_ns < start_verdict.step_time_ns)) {
        start = std::move(plan);
        start_verdict = result;
      }
    });
  if (!start_verdict.feasible) return;
  SimulationResult polished_verdict;
  plan::Plan polished = polish(request, std::move(start), polished_verdict, size, polishing, true);
  if (polished_verdict.feasible && (!verdict.feasible || polished_verdict.step_time_ns < verdict.step_time_ns)) {
    chosen = std::move(polished);
    verdict = polished_verdict;
  }
}

// The portfolio for live bytes: every candidate is judged by the bytes the trace holds.
plan::Plan plan_delta_live(const PlanRequest& request) {
  // The sweep books transfers on the native timeline, which stalls shift, and the exchange
  // rate between exposed transfer time and compute is uncertain. So plan with a few settings,
  // each also for a slightly tighter budget, and keep what the simulator judges fastest.
  const PortfolioSize size = portfolio_size(*request.index);
  plan::Plan best;
  std::int64_t best_time = std::numeric_limits<std::int64_t>::max();
  bool have_any = false;
  const std::int64_t native = request.index->native_step_ns();
  // The fastest few feasible plans of each family (the sweep's, the offline replay's without
  // revivals, with them, with their cost shared, with siblings, and with dropped inputs
  // shared), for
  // the swap refinement at the end: the fastest before refinement is not always the fastest
  // after, and without a quota one family's near-ties crowd out the other's.
  enum Family { sweep_family, remat_family, revive_family, shared_revive_family, sibling_family, shared_input_family, families };
  std::vector<std::pair<std::int64_t, plan::Plan>> finalists[families];
  auto consider = [&](const SimulationResult& result, const plan::Plan& plan, Family family) {
    if (!result.feasible) return;
    auto& list = finalists[family];
    list.emplace_back(result.step_time_ns, plan);
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    if (list.size() > size.finalists) list.pop_back();
  };
  for (const SweepSetting& setting : kSweepSettings) {
    if (have_any && best_time <= native) break;
    sweep_tightening(request, setting, true, [&](plan::Plan& plan, const SimulationResult& result) {
      consider(result, plan, sweep_family);
      if (!have_any || (result.feasible && result.step_time_ns < best_time)) {
        if (result.feasible) best_time = result.step_time_ns;
        best = std::move(plan);
        have_any = true;
      }
    });
  }
  // Regeneration-only plans from an offline replay of the step (chains of any length), scored
  // with the future known and, as DTR does online, with staleness. They cannot beat a plan
  // that already runs at native speed (within 0.1%).
  const std::size_t threads = planner_threads(request.threads);
  if (!(have_any && best_time <= native + native / 1000)) {
    const std::vector<RematOptions> settings = remat_settings(size.remat_settings, size.revive_settings, size.sibling_settings,
                                                              size.shared_input_settings, size.restarts);
    std::vector<std::pair<plan::Plan, SimulationResult>> replays(settings.size());
    parallel_for(settings.size(), threads, [&](std::size_t k) {
      replays[k].first = plan_offline_remat(request, settings[k]);
      trim_revivals(*request.index, replays[k].first);
      replays[k].second = judge(request, replays[k].first);
    });
    for (std::size_t k = 0; k < replays.size(); ++k) {  // in the settings' order, as if run one by one
      auto& [plan, result] = replays[k];
      if (!result.feasible) continue;
      consider(result, plan,
               settings[k].dropped_input_weight < 1 ? shared_input_family
               : settings[k].sibling_window >= 0 ? sibling_family
               : !settings[k].revive_inputs ? remat_family
               : settings[k].share_revived_cost ? shared_revive_family : revive_family);
      if (best_time == std::numeric_limits<std::int64_t>::max() || result.step_time_ns < best_time) {
        best_time = result.step_time_ns;
        best = std::move(plan);
        have_any = true;
      }
    }
  }
  // Regenerations whose block could travel over idle copy engines instead become swaps.
  // Each try is one simulation: the polish below gets about two million simulated ops per
  // plan. The finalists, up to 18 plans on long traces, get fewer on traces with many uses
  // per op: each simulation walks the uses too, and about 2.4 million ops and uses per plan
  // keeps all 256 tries on the DTR logs but LSTM, while GPT2-XL (3,310 ops, 21,400 uses) gets
  // 97, where 256 were most of its planning time.
  const std::size_t ops = request.index->op_count();
  std::size_t walked = ops;
  for (std::size_t op = 0; op < ops; ++op) walked += request.index->uses(op).size();
  const std::size_t polish_tries = std::clamp<std::size_t>(2'000'000 / std::max<std::size_t>(1, ops), 16, 256);
  SwapRefinementOptions refinement;
  refinement.max_tries = std::clamp<std::size_t>(2'400'000 / std::max<std::size_t>(1, walked), 16, polish_tries);
  // The finalists' refinement books copies from the releases: with early copies it steers
  // the polish below down paths that end slower (densenet121 at 0.5: 1.0808 against 1.0776).
  refinement.early_copies = false;
  std::vector<plan::Plan*> to_refine;
  std::vector<int> family_of;
  for (int f = 0; f < families; ++f)
    for (auto& finalist : finalists[f]) {
      to_refine.push_back(&finalist.second);
      family_of.push_back(f);
    }
  std::vector<SimulationResult> refined(to_refine.size());
  parallel_for(to_refine.size(), threads, [&](std::size_t k) {
    plan::Plan& plan = *to_refine[k];
    refined[k] = judge(request, plan);
    if (refined[k].regenerations > 0) plan = refine_with_swaps(request, std::move(plan), refined[k], refinement);
  });
  // The fastest few, each of a different step time (near-identical plans polish alike), are
  // polished; the fastest after polishing wins.
  struct Ranked {
    std::int64_t time;
    plan::Plan* plan;
    int family;  // -1: the fastest before refinement
  };
  std::vector<Ranked> ranked;
  if (have_any) ranked.push_back({best_time, &best, -1});
  for (std::size_t k = 0; k < to_refine.size(); ++k)
    if (refined[k].feasible) ranked.push_back({refined[k].step_time_ns, to_refine[k], family_of[k]});
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) { return a.time < b.time; });
  std::vector<plan::Plan*> to_polish;
  std::vector<bool> family_taken(families + 1, false);
  std::vector<std::int64_t> times;  // of the plans taken: each time once
  for (int pass = size.polish_across_families ? 0 : 1; pass < 2; ++pass)
    for (const Ranked& r : ranked) {
      if (to_polish.size() == size.polished) break;
      if (std::find(times.begin(), times.end(), r.time) != times.end()) continue;
      if (pass == 0 && family_taken[r.family + 1]) continue;
      family_taken[r.family + 1] = true;
      to_polish.push_back(r.plan);
      times.push_back(r.time);
    }
  const Polishing polishing = polishing_for(size, polish_tries);
  if (to_polish.empty()) {
    SimulationResult verdict = judge(request, best);
    try_without_state_swaps(request, size, polishing, best, verdict);
    return best;
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
    if (size.both_copy_models && k < kBothWays) jobs.emplace_back(k, false);
  }
  std::vector<plan::Plan> polished(jobs.size());
  std::vector<SimulationResult> verdicts(jobs.size());
  parallel_for(jobs.size(), threads, [&](std::size_t job) {
    const auto [k, early_copies] = jobs[job];
    polished[job] = polish(request, *to_polish[k], verdicts[job], size, polishing, early_copies);
  });
  std::size_t winner = 0;
  for (std::size_t k = 1; k < polished.size(); ++k)
    if (verdicts[k].feasible && (!verdicts[winner].feasible || verdicts[k].step_time_ns < verdicts[winner].step_time_ns)) winner = k;
  try_without_state_swaps(request, size, polishing, polished[winner], verdicts[winner]);
  return std::move(polished[winner]);
}

// One fraction of the budget tried by fit_through_allocator: planned in live bytes, then
// placed by the allocator capped at the real budget.
struct FitTry {
  plan::Plan plan;
  SimulationResult placed;
  PlanRequest::FitAttempt attempt;
  std::int64_t live_time = 0;
  std::exception_ptr error;  // rethrown only where the fitting reaches this fraction
};

FitTry try_fraction(const PlanRequest& request, double fraction, std::size_t threads) {
  FitTry out;
  try {
    PlanRequest live = request;
    live.through_allocator = false;
    live.threads = threads;
    live.budget_bytes = static_cast<std::uint64_t>(double(request.budget_bytes) * fraction);
    plan::Plan plan = plan_delta_live(live);
    const bool fits_live = plan.predicted.feasible;
    out.live_time = plan.predicted.step_time_ns;
    plan.budget_bytes = request.budget_bytes;
    plan.budget_ratio = request.budget_ratio;
    SimulationResult placed = judge(request, plan);
    out.attempt = {fraction, fits_live, {}};
    if (!placed.feasible && fits_live && placed.shortfall_bytes > 0) {
      // The allocator could not place one allocation: a few evictions of blocks idle across
      // that op (judged through the allocator, at most 1% of the step in replays) often make
      // room, where a smaller budget reshapes the whole plan. The repaired plan is slower than
      // in live bytes, so it is weighed against the next fraction's.
      plan::Plan repaired = plan;
      SimulationResult verdict = placed;
      const double allowance = 0.01 * double(request.index->native_step_ns());
      if (repair_with_evictions(request, repaired, verdict, allowance, std::numeric_limits<std::int64_t>::max(), {})) {
        out.attempt.repaired_at = placed.error.substr(0, placed.error.find("): ") + 1);
        plan = std::move(repaired);
        placed = verdict;
      }
    }
    plan.predicted.planned_fraction = fraction;
    out.plan = std::move(plan);
    out.placed = std::move(placed);
  } catch (...) {
    out.error = std::current_exception();
  }
  return out;
}

plan::Plan fit_through_allocator(const PlanRequest& request) {
  // Fragmentation: the caching allocator rounds and splits, so a plan that fits in live bytes
  // may not be placeable under the same cap. Plan for a slightly smaller live budget until the
  // allocator, capped at the real one, places every allocation; the first that fits (the
  // largest fraction) wins. Feasibility is not monotone in the fraction (densenet121 at 0.2:
  // no plan fits live at 0.99, one at 0.81 fits the allocator), so every fraction is tried.
  // A plan the allocator places only by waiting for evictions in flight runs slower than in
  // live bytes; then the next fraction is tried too and the faster of the two kept (GPT2-XL
  // bfloat16 at batch 40 under an H200: 1.212 at 1.0 of the budget, 1.195 at 0.99).
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
  plan::Plan last, best;
  bool placed_one = false;
  for (std::size_t first = 0; first < kCount; first += width) {
    const std::size_t take = std::min(width, kCount - first);
    std::vector<FitTry> tries(take);
    parallel_for(take, take, [&](std::size_t k) {
      const std::size_t share = threads / take + (k < threads % take ? 1 : 0);  // an odd core to the first
      tries[k] = try_fraction(request, kFractions[first + k], share);
    });
    for (FitTry& t : tries) {
      if (t.error) std::rethrow_exception(t.error);
      plan::Plan& plan = t.plan;
      const SimulationResult& placed = t.placed;
      if (request.on_fit_attempt) request.on_fit_attempt(t.attempt, placed);
      if (placed_one) {  // the second try after a plan placed with waits
        if (placed.feasible && placed.step_time_ns < best.predicted.step_time_ns) return std::move(plan);
        return best;
      }
      if (placed.feasible) {
        if (placed.step_time_ns <= t.live_time) return std::move(plan);
        best = std::move(plan);
        placed_one = true;
        continue;
      }
      // Else keep a diagnosis of a plan that fits live.
      if (t.attempt.fits_live || t.attempt.fraction == kFractions[0]) last = std::move(plan);
    }
  }
  return placed_one ? best : last;
}

// A second start for the local search, on request: the plan with the choice the lower bound's
// optimum makes at the op in most excess (delta/bound_guided.hpp), repaired, polished and searched
// like the first; the faster is kept (placed by the allocator too where the request goes
// through it). Needs an LP solver. resnet32 at 0.2 of its peak: 1.1676 to 1.1663. Not the
// default: the LP, the polish and the second search cost more than they gain elsewhere (with
// it on by default, a resnet50 capture at batch 8 under 700 MiB took 54 s to plan, and the
// capture test's batch search ran past its 300 s limit).
void search_from_bound(const PlanRequest& request, const PlanRequest& live, LocalSearchOptions search,
                       plan::Plan& plan, SimulationResult& judged) {
  const OverheadBound bound = overhead_lower_bound(live, kBoundGuideSeconds, false);
  if (bound.status != OverheadBound::Status::bounded || !bound.explanation) return;
  std::optional<plan::Plan> guided = follow_bound(live, plan, *bound.explanation);
  if (!guided) return;
  const PortfolioSize size = portfolio_size(*live.index);
  SimulationResult verdict;
  plan::Plan candidate = polish(live, std::move(*guided), verdict, size, polishing_for(size, kGuidedRefinements), true);
  if (!verdict.feasible) return;
  search.from_bound = true;
  candidate = search_locally(live, std::move(candidate), verdict, search);
  if (!verdict.feasible) return;
  if (request.through_allocator) {
    const SimulationResult placed = judge(request, candidate), current = judge(request, plan);
    if (!placed.feasible || (current.feasible && placed.step_time_ns >= current.step_time_ns)) return;
  } else if (verdict.step_time_ns >= judged.step_time_ns) {
    return;
  }
  plan = std::move(candidate);
  judged = verdict;
}

// Last, partial swaps where the budget leaves room for part of a rebuilt block, and the copy
// lane's idle head filled to make lane time for them. Judged by the request itself (through
// the allocator when it goes through it): each change is small, and only short traces, those
// the local search runs on, get here.
void finish_with_parts(const PlanRequest& request, plan::Plan& plan) {
  SimulationResult judged = judge(request, plan);
  if (!judged.feasible) return;
  plan = swap_parts(request, std::move(plan), judged, {});
  plan = exchange_at_lane_head(request, std::move(plan), judged, {});
}

}  // namespace

plan::Plan plan_delta(const PlanRequest& request) {
  plan::Plan plan = request.through_allocator ? fit_through_allocator(request) : plan_delta_live(request);
  // Last, the local search on the chosen plan.
  LocalSearchOptions search;
  search.rounds = request.search_rounds.value_or(portfolio_size(*request.index).search_rounds);
  search.patience = request.search_patience.value_or(kSearchPatience);
  if (search.rounds == 0 || !plan.predicted.feasible) return plan;
  // Through the allocator, the tries are judged in live bytes under the budget the plan was
  // made for (a fraction of the real one), which takes a fraction of the time, and each
  // faster plan must then be placed by the allocator and run faster there too.
  PlanRequest live = request;
  live.through_allocator = false;
  live.budget_bytes = static_cast<std::uint64_t>(double(request.budget_bytes) * plan.predicted.planned_fraction);
  if (request.through_allocator) search.confirm_with = &request;
  const double fraction = plan.predicted.planned_fraction;
  SimulationResult judged = judge(live, plan);
  if (judged.feasible) plan = search_locally(live, std::move(plan), judged, search);
  if (judged.feasible && request.search_from_bound.value_or(ops_and_uses(*request.index) <= kSecondStartOpsAndUses))
    search_from_bound(request, live, search, plan, judged);
  plan.budget_bytes = request.budget_bytes;
  if (judged.feasible) finish_with_parts(request, plan);
  plan.budget_ratio = request.budget_ratio;
  plan.predicted.planned_fraction = fraction;
  judge(request, plan);
  return plan;
}

}  // namespace delta::planner
