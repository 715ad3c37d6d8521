// The portfolio of candidate plans behind DELTA's plan in live bytes: how much of it a trace
// gets (PortfolioSize), the candidates themselves (the sweep and the offline
// rematerialisation under many settings, delta/candidates.hpp), each judged by the simulator
// and kept, the fastest few of each family, as finalists; their regenerations turned into
// swaps; and the fastest few polished (delta/polish.hpp), the fastest after polishing chosen.
// delta/pipeline.cpp calls its stages in order.
#pragma once

#include "common/request.hpp"
#include "common/stage_memo.hpp"
#include "delta/passes/pass.hpp"
#include "delta/polish.hpp"
#include "delta/sweep/sweep.hpp"
#include "sim/simulator.hpp"
#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace delta::planner {

// How much of the portfolio a trace gets: the offline replay's settings tried and the plans
// of each family refined. Planning time grows with the trace, so long traces get a prefix.
// Every simulation walks the ops and their block uses, so the whole portfolio goes to traces
// with at most 12,000 of both together (the DTR logs but LSTM: densenet121 has 2,072 ops and
// 7,036 uses, the transformer 2,821 and 5,525); GPT2-large and GPT2-XL, with three times as many
// uses per op (2,496 ops and 16,100 uses; 3,310 and 21,400), would take 8 s and more, and get
// the second row (GPT2-XL plans in under two seconds at 0.8, 0.5 and 0.35 of its peak, live
// or fitted, on two cores).
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

// Traces up to this many ops and block uses together get the whole portfolio.
constexpr std::size_t kWholePortfolioOpsAndUses = 12'000;

// True when the plan swaps a block live before the step (an optimizer's state) over ops
// before its first use.
bool swaps_state_before_first_use(const TraceIndex& index, const plan::Plan& plan);

// What sizes the planner's effort: ops and block uses together.
std::size_t ops_and_uses(const TraceIndex& index);
PortfolioSize portfolio_size(const TraceIndex& index);
// The polish's passes sized for the trace: `max_tries` intervals tried by pruning, swap
// refinement and replay sharing.
PassSettings pass_settings(const PortfolioSize& size, std::size_t max_tries);

// A plan with its verdict.
struct Judged {
  plan::Plan plan;
  SimulationResult verdict;
};

class Portfolio {
 public:
  explicit Portfolio(const PlanRequest& request);

  // Candidates: the sweep under each of its settings (delta/candidates.hpp), until one runs at
  // native speed.
  void sweep();
  // Candidates: the offline rematerialisation under the grid of its settings, unless a plan
  // already runs at native speed (within 0.1%).
  void rematerialise();
  // Candidates where no plan of regenerations alone fits: activations rebuilt over the ops
  // where regeneration fits, state swapped over the rest (delta/hybrid/).
  void rebuild_beside_swaps();
  // Regenerations whose block could travel over idle copy engines instead become swaps, on
  // the finalists of every family.
  void refine_finalists();
  // The fastest few, each of a different step time, polished; the fastest after polishing.
  Judged polish_fastest(const Polish& polish);
  // Where `chosen` swaps an optimizer's state before its first use: the fastest sweep without
  // such swaps and the fastest that takes them only as far as the link carries them
  // (StateSwaps::within_link, unless the request says not), each polished, replace it when
  // faster.
  void fewer_state_swaps(const Polish& polish, Judged& chosen) const;
  // Where `chosen` moves parameters and is slower than native: the fastest sweep that keeps
  // every parameter resident, polished so, replaces it when faster.
  void fewer_parameter_swaps(const Polish& polish, Judged& chosen) const;
  // The sweeps fewer_state_swaps would polish for `chosen`, polished side by side into the
  // request's stage memo, where the threads and a memo allow (the stage then takes them).
  void polish_alternatives_side_by_side(const Polish& polish, const Judged& chosen) const;
  // Where the stages keep their plans (common/stage_memo.hpp).
  StageMemo& memo() const { return memo_; }

 private:
  // The finalists' families: the sweep's, the offline replay's without revivals, with them,
  // with their cost shared, with siblings, with dropped inputs shared, and rebuilt beside swaps.
  enum Family { sweep_family, remat_family, revive_family, shared_revive_family, sibling_family, shared_input_family, hybrid_family, families };
  void consider(const SimulationResult& result, const plan::Plan& plan, Family family);
  // A feasible candidate considered, and kept as the best plan when faster (moved from then).
  void take(const SimulationResult& result, plan::Plan& plan, Family family);
  // The fastest sweep of `request` with any of `kinds` of state swaps, polished; it replaces
  // `chosen` when faster.
  void polish_fastest_sweep(const PlanRequest& request, std::span<const StateSwaps> kinds, const Polish& polish,
                            Judged& chosen) const;
  bool wants_fewer_state_swaps(const Judged& chosen) const;
  // Past the time limit with a plan that runs: the other sweeps polished are not made (each is
  // a portfolio's sweeps and a polish, seconds on GPT2-XL, where the limit may be 2 s).
  bool past_limit_with(const Judged& chosen) const { return chosen.verdict.feasible && past_deadline(request_); }
  std::vector<StateSwaps> fewer_state_swap_kinds() const;
  // That sweep, polished (its verdict infeasible where no sweep fits), taken from the
  // request's stage memo where an earlier plan made it.
  Judged polished_fastest_sweep(const PlanRequest& request, std::span<const StateSwaps> kinds, const Polish& polish) const;

  const PlanRequest& request_;
  // The stages' plans kept for reuse: the request's memo (the fitting's, shared by the plans of
  // one live budget), else the portfolio's own.
  StageMemo own_memo_;
  StageMemo& memo_;
  const PortfolioSize size_;
  const std::size_t threads_;
  const std::int64_t native_;
  const PassSettings polishing_;
  // The fastest plan so far (or the first, infeasible, where none is feasible yet).
  plan::Plan best_;
  std::int64_t best_time_;
  bool have_any_ = false;
  bool regeneration_fits_ = false;  // some plan of the offline rematerialisation is feasible
  // The fastest few feasible plans of each family, for the swap refinement at the end: the
  // fastest before refinement is not always the fastest after, and without a quota one
  // family's near-ties crowd out the other's.
  std::vector<std::pair<std::int64_t, plan::Plan>> finalists_[families];
  // After refine_finalists: each finalist, its family and its verdict.
  std::vector<plan::Plan*> refined_plans_;
  std::vector<int> family_of_;
  std::vector<SimulationResult> refined_;
};

}  // namespace delta::planner
