// The stages after the portfolio's plan is chosen (and fitted to the allocator), on traces
// short enough for them: an iterated local search on the plan (delta/local_search.hpp), a
// second start from the lower bound's optimum (delta/bound_guided.hpp), and last the passes
// that need a finished plan (partial swaps, the copy lane's idle head). The searches judge in
// live bytes under the fraction of the budget the plan was fitted to; each faster plan must
// also be placed by the allocator where the request goes through it.
#pragma once

#include "common/request.hpp"
#include "delta/local_search.hpp"
#include "delta/passes/pass.hpp"
#include "delta/polish.hpp"
#include "sim/simulator.hpp"

#include <delta/plan.hpp>

#include <span>

namespace delta::planner {

class Search {
 public:
  Search(const PlanRequest& request, plan::Plan plan);
  // Whether the search runs: it has rounds (PlanRequest::search_rounds, else the portfolio's
  // for the trace's size) and the plan is feasible. Where it does not, plan() is the plan given.
  bool runs() const { return runs_; }
  // The local search on the plan.
  void locally();
  // The plan with the bound's choice at the op in most excess, polished with `polish` and
  // searched like the first, replaces it when faster. By default on traces of up to 2,000
  // ops and block uses together (PlanRequest::search_from_bound).
  void from_bound(const Polish& polish);
  // The passes once, judged by the request itself, and the plan's own verdict recorded.
  void finish(std::span<const Pass> passes);
  plan::Plan plan() && { return std::move(plan_); }

 private:
  const PlanRequest& request_;
  plan::Plan plan_;
  LocalSearchOptions options_;
  bool runs_ = false;
  PlanRequest live_;       // the request in live bytes, under the fraction the plan was made for
  double fraction_ = 1;
  SimulationResult judged_;  // the plan's verdict under live_
};

}  // namespace delta::planner
