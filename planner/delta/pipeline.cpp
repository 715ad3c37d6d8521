// DELTA's method, as the sequence it runs. Each stage is a line of plan_in_live_bytes() or
// plan_delta() below, and each refinement pass a line of one of the lists; what a stage or a
// pass does is in the file named beside it. Every step keeps a change only where the
// simulator finds the plan faster and still under the budget. To add a pass, write it in a
// room of delta/passes/ as a function of the Pass shape (pass.hpp) and add its line to the
// list where it should run: {name, when it has anything to do, the pass}.
#include "delta/pipeline.hpp"

#include "delta/fitting.hpp"
#include "delta/passes/discard_keeping.hpp"
#include "delta/passes/pass.hpp"
#include "delta/passes/replays/gradient_rebuilds.hpp"
#include "delta/polish.hpp"
#include "delta/portfolio.hpp"
#include "delta/search.hpp"

#include "common/parallel_for.hpp"
#include "sim/stage_clock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

namespace delta::planner {
namespace {

// The polish of a candidate plan (delta/polish.hpp): rounds of these while the step gets faster,
constexpr Pass kPolishRound[] = {
    {"trim revivals to their last reader", always, trim_revivals_pass},            // passes/replays/revival_trim.hpp
    {"prune evictions the plan does not need", always, prune_pass},               // passes/evictions/interval_pruning.hpp
    {"regenerations become swaps", has_regenerations, swap_refinement_pass},      // passes/evictions/swap_refinement.hpp
    {"regenerations traded for cheaper evictions", exchange_on, exchange_pass},   // passes/evictions/eviction_exchange.hpp
    {"relieve the longest stalls", has_stalls, relieve_stalls_pass},              // passes/evictions/eviction_exchange.hpp
    {"state swapped in place of state needed sooner", has_stalls, later_state_pass},  // passes/copies/later_state_swaps.hpp
    {"fetch back earlier where ops wait", has_stalls, advance_prefetches_pass},   // passes/copies/prefetch_advance.hpp
    {"share replays between rebuilds", has_two_rebuilds, share_replays_pass},     // passes/replays/replay_sharing.hpp
    {"retain freed blocks instead of reviving them", has_revivals, retention_pass},  // passes/replays/revival_retention.hpp
    {"retain freed blocks rebuilt inside many replays", has_regenerations, hub_retention_pass},  // passes/replays/hub_retention.hpp
    {"rebuild once the evicted blocks other replays rebuild", has_two_rebuilds, hub_rebuild_pass},  // passes/replays/hub_rebuild.hpp
    {"swap a block's source and rebuild the block from it", source_swaps_on, source_swaps_pass},  // passes/evictions/source_swaps.hpp
    kUntilFaster,
};
// then rounds of hidden swaps (memory for nothing, on traces that get the whole portfolio),
// each with the evictions it makes redundant pruned, and what that opens,
constexpr Pass kHiddenSwapRound[] = {
    {"hidden swaps at the fullest ops", hidden_swaps_on, hidden_swaps_pass},      // passes/evictions/eviction_exchange.hpp
    kUntilFaster,
    {"relieve the longest stalls", has_stalls, relieve_stalls_pass},              // passes/evictions/eviction_exchange.hpp
    {"regenerations traded for cheaper evictions", has_regenerations, exchange_pass},  // passes/evictions/eviction_exchange.hpp
};
// and last, copies out started at the blocks' last writes where that is no slower.
constexpr Pass kPolishLast[] = {
    {"early copies", always, early_copies_pass},                                  // common/early_copies.hpp
};
constexpr Polish kPolish{kPolishRound, kHiddenSwapRound, kPolishLast};

// The plan made and searched, as it will run (through the allocator where the request says so):
constexpr Pass kPlaced[] = {
    {"state swaps moved to the state read last", has_stalls, reorder_state_pass},  // passes/copies/later_state_swaps.hpp
    {"copies back needed later issued behind those ops wait for", has_stalls, prefetch_deferral_pass},  // passes/placed/prefetch_deferral.hpp
    {"swaps the link cannot carry rebuilt", has_stalls, swaps_rebuilt_pass},       // passes/placed/swaps_rebuilt.hpp
};
// then each of two ways, the faster kept (the first on a tie): the trimmed swaps, then the
// lane's idle time filled,
constexpr Pass kTrimmedThenFilled[] = {
    {"stalled swaps trimmed to the pages that must leave", has_stalls, trimmed_swaps_pass},  // passes/placed/trimmed_swaps.hpp
    {"copies back pulled into the lane's idle time, room made by rebuilds", has_stalls, lane_gap_fill_pass},  // passes/placed/lane_gap_fill.hpp
};
// or the lane's idle time filled first as well: the trimmed swaps then see other waits.
constexpr Pass kFilledAroundTrimmed[] = {
    {"copies back pulled into the lane's idle time, room made by rebuilds", has_stalls, lane_gap_fill_pass},
    {"stalled swaps trimmed to the pages that must leave", has_stalls, trimmed_swaps_pass},
    {"copies back pulled into the lane's idle time, room made by rebuilds", has_stalls, lane_gap_fill_pass},
};

// Once the searches are done (they need a finished plan):
constexpr Pass kFinish[] = {
    {"partial swaps where the budget leaves room", always, partial_swaps_pass},   // passes/copies/partial_swaps.hpp
    {"the copy lane's idle head filled", always, lane_head_pass},                 // passes/copies/lane_head_exchange.hpp
};

// Under a time limit, the share of the time left that the plan in live bytes (and its fitting
// to the allocator) may take before the search and the passes on the plan as placed.
constexpr double kStagesShareOfTime = 0.5;

void finish_as_placed(const PlanRequest& as_placed, plan::Plan& plan, SimulationResult& judged);

// DELTA's plan in live bytes: the portfolio (delta/portfolio.hpp), sized for the trace.
plan::Plan plan_in_live_bytes(const PlanRequest& request) {
  StageScope stage("planned in live bytes");
  Portfolio portfolio(request);
  const auto portfolio_choice = [&]() -> StageMemo::Made {
    portfolio.sweep();                              // candidates: the sweep (delta/sweep/)
    portfolio.rematerialise();                      // candidates: the offline rematerialisation (delta/remat/)
    portfolio.rebuild_beside_swaps();               // candidates: activations rebuilt, state swapped (delta/hybrid/)
    portfolio.refine_finalists();                   // the fastest of each family: regenerations become swaps
    Judged fastest = portfolio.polish_fastest(kPolish);  // the fastest few polished; the fastest wins
    return {std::move(fastest.plan), fastest.verdict};
  };
  // None of these stages reads state_swaps_within_link: where the fitting plans the same
  // budget again without those swaps, the memo gives what they made (common/stage_memo.hpp).
  auto [plan, verdict] = portfolio.memo().get(stage_key("portfolio's choice", request), portfolio_choice);
  Judged chosen{std::move(plan), verdict};
  portfolio.polish_alternatives_side_by_side(kPolish, chosen);  // the next stage's two sweeps, made side by side
  portfolio.fewer_state_swaps(kPolish, chosen);    // unless a sweep with fewer state swaps (none, or those the link carries) does better
  portfolio.fewer_parameter_swaps(kPolish, chosen);  // or one with every parameter resident
  // Weight gradients rebuilt from their inputs held (passes/replays/gradient_rebuilds.hpp),
  // finished at once: the fitting must place the plan with its copies back in the room the
  // rebuilds make (GPT2-XL bfloat16 at 0.7 of its peak, half the candidates rebuilt: 1.2654
  // finished only once placed, 1.2241 finished here too; with only the first passes of the
  // finish or the lane's idle time filled alone, 1.3464 and 1.2568).
  if (request.gradient_rebuild_share > 0) {
    SimulationResult judged = judge(request, chosen.plan);
    if (judged.feasible && rebuild_gradients(request, chosen.plan, judged, request.gradient_rebuild_share))
      finish_as_placed(request, chosen.plan, judged);
  }
  return std::move(chosen.plan);
}

// The passes on a plan as it will run (kPlaced), then the trimmed swaps and the lane's idle
// time filled, two ways side by side (where the request has two threads), the faster kept:
// filling the lane's idle time before the trimmed swaps changes which waits they trim, and
// either order wins somewhere (gpt2-large float32 at 0.6: 1.5722 trimmed first, 1.5409 filled
// first; BERT-Large at 0.6: 1.73799 and 1.73833). `judged` is the plan's verdict and stays so.
void finish_as_placed(const PlanRequest& as_placed, plan::Plan& plan, SimulationResult& judged) {
  StageScope stage(plan.predicted.copies_back_by_need ? "copies back by need" : "copies back in the plan's order");
  run_once(kPlaced, as_placed, plan, judged, PassSettings{});
  plan::Plan filled_first = plan;
  SimulationResult filled_first_judged = judged;
  parallel_for(2, planner_threads(as_placed.threads) >= 2 ? 2 : 1, [&](std::size_t k) {
    if (k == 0) run_once(kTrimmedThenFilled, as_placed, plan, judged, PassSettings{});
    else run_once(kFilledAroundTrimmed, as_placed, filled_first, filled_first_judged, PassSettings{});
  });
  if (filled_first_judged.feasible && filled_first_judged.step_time_ns < judged.step_time_ns) {
    plan = std::move(filled_first);
    judged = std::move(filled_first_judged);
  }
}

// The share of the weight gradients every plan in live bytes rebuilds from their inputs held
// (passes/replays/gradient_rebuilds.hpp), chosen once on the plan in live bytes at the whole
// budget, each way finished as the plan as placed will be: only the passes there move the
// copies back into the room the rebuilds make, and only the fitting then finds the live budget
// the allocator places such a plan at (GPT2-XL bfloat16 at 0.7 of its peak, 72 of 145
// rebuilt: 1.2878 to 1.2241, placed for 0.99 of the budget where the plan without was placed
// for 0.9975; rebuilt only in the plan as placed, the allocator placed none but the first 16).
double gradient_rebuild_share(const PlanRequest& request) {
  if (!request.rebuild_gradients || past_deadline(request) || !gradients_worth_rebuilding(*request.index, request.budget_bytes))
    return 0;
  StageScope stage("weight gradients rebuilt from their inputs held: how many");
  PlanRequest live = request;
  live.through_allocator = false;
  return choose_rebuild_share(live, plan_in_live_bytes(live), finish_as_placed);
}

// The plan of the stages above, judged as `request` says.
plan::Plan plan_stages(const PlanRequest& request) {
  // With fragmentation counted, planned in live bytes for shrinking fractions of the budget
  // until the caching allocator places the plan (delta/fitting.hpp). Under a time limit these
  // stages take half the time left: the passes on the plan as placed gain the most per second
  // (GPT2-XL bfloat16 at 0.7 of its peak: 1.4820 to 1.2878 in 1.2 s of 20 s).
  PlanRequest fitting = request;
  fitting.deadline = share_of_time_left(request, kStagesShareOfTime);
  StageMemo memo;  // in live bytes alone, the choice's plan is the one made below
  if (!request.through_allocator && !fitting.stage_memo) fitting.stage_memo = &memo;
  fitting.gradient_rebuild_share = gradient_rebuild_share(fitting);
  plan::Plan plan = request.through_allocator ? fit_to_allocator(fitting, plan_in_live_bytes) : plan_in_live_bytes(fitting);
  // From here on judged with the moved blocks placed as the fitting chose (packed or not).
  PlanRequest as_placed = request;
  as_placed.packed_moves = plan.predicted.executor_placement && plan.predicted.packed_moves;
  as_placed.packed_groups = as_placed.packed_moves && plan.predicted.packed_groups;
  Search search(as_placed, std::move(plan));        // delta/search.hpp: on short traces
  if (search.runs() && !past_deadline(as_placed)) {
    StageScope stage("the search");
    search.locally();                               // iterated local search; each try settles with its kSettle (delta/local_search.cpp)
    if (!past_deadline(as_placed)) search.from_bound(kPolish);  // a second start from the bound's optimum (delta/bound_guided.hpp)
    search.finish(kFinish);                         // the passes that need a finished plan
  }
  plan::Plan done = std::move(search).plan();
  // Last, judged as the plan will run (through the allocator where asked): a part of a block
  // kept on the device may leave the allocator no room elsewhere, which live bytes cannot show
  // (a GPT-2 capture at 0.6 of its peak, trimmed in the polish, was refused at the whole
  // budget); and after the search, whose moves from a trimmed start ended slower (BERT-Large at
  // 0.7: 1.0976 against 1.0610).
  StageScope stage("finished as placed");
  SimulationResult placed = judge(as_placed, done);
  if (!placed.feasible) return done;
  // From here on, two ways side by side, the faster kept (by need on a tie): the copies back
  // issued at one op take the lane in the order their blocks are needed (plan.hpp), or in the
  // plan's order, as made. Each way's passes move copies knowing its order. Planned by need from
  // the start, the fitting and the polish settled elsewhere, faster on some steps and slower on
  // others (the recorded GPT-2 at 0.3 of its peak 3.2408 to 3.1686, at 0.4 2.6949 to 2.7255);
  // from here either way wins somewhere (BERT-Large at 0.7 1.0388 by need, 1.0477 as made;
  // gpt2-large bfloat16 at 0.6 1.84633 and 1.84596).
  plan::Plan by_need = done;
  by_need.predicted.copies_back_by_need = true;
  SimulationResult by_need_judged = judge(as_placed, by_need);
  if (!by_need_judged.feasible) {
    finish_as_placed(as_placed, done, placed);
    return done;
  }
  const std::size_t threads = planner_threads(request.threads);
  parallel_for(2, threads >= 2 ? 2 : 1, [&](std::size_t k) {
    PlanRequest mine = as_placed;  // each way on half the threads, an odd one to the first
    mine.threads = std::max<std::size_t>(1, threads / 2 + (k == 0 ? threads % 2 : 0));
    if (k == 0) finish_as_placed(mine, by_need, by_need_judged);
    else finish_as_placed(mine, done, placed);
  });
  // The plan made in the plan's order may still run faster by need once finished.
  if (placed.feasible) {
    plan::Plan flipped = done;
    flipped.predicted.copies_back_by_need = true;
    SimulationResult flipped_judged = judge(as_placed, flipped);
    if (flipped_judged.feasible && flipped_judged.step_time_ns < placed.step_time_ns) {
      done = std::move(flipped);
      placed = std::move(flipped_judged);
    }
  }
  if (!placed.feasible || (by_need_judged.feasible && by_need_judged.step_time_ns <= placed.step_time_ns)) return by_need;
  return done;
}

// Under the executor's discard copies, discards that cost more than they free are kept
// resident (delta/passes/discard_keeping.hpp): judged at the real budget, as placed. False
// (and `plan` judged) when the plan is not feasible so.
bool keeping_discards(const PlanRequest& request, plan::Plan& plan) {
  PlanRequest as_placed = request;  // the moved blocks placed as the fitting chose
  as_placed.packed_moves = plan.predicted.executor_placement && plan.predicted.packed_moves;
  as_placed.packed_groups = as_placed.packed_moves && plan.predicted.packed_groups;
  SimulationResult judged = judge(as_placed, plan);
  if (!judged.feasible) return false;
  plan = keep_discards_resident(as_placed, std::move(plan), judged);
  return true;
}

}  // namespace

plan::Plan plan_delta(const PlanRequest& request) {
  if (!request.discard_copies) return plan_stages(request);
  // The stages make and polish their plans as judged, and with each discard's copy counted
  // their discards are dear, so their plans settle elsewhere: on GPT2-XL at 0.8 of its peak
  // on swaps the link cannot carry (1.169), where the plan made with discards free needs
  // none of its 1,121 discards (each a few ops before the program frees its block) and runs
  // at 1.006 with them kept resident; the DTR transformer at 0.8 1.172 against 1.098. Yet
  // neither wins everywhere (the recorded GPT-2 at 0.8: 1.081 made with the copies counted,
  // 1.182 made without). So both are made, side by side on half the threads each, the plan
  // made with discards free then judged with the copies and its discards that do not pay
  // kept resident, and the faster kept (the one made with the copies on a tie).
  PlanRequest copying = request, dropping = request;
  dropping.discard_copies = false;
  dropping.discards_copied_later = true;
  const std::size_t threads = planner_threads(request.threads);
  copying.threads = std::max<std::size_t>(1, threads / 2 + threads % 2);
  dropping.threads = std::max<std::size_t>(1, threads / 2);
  static constexpr const char* kNames[2] = {"made with discard copies", "made with discards free"};
  // Both report their progress, labelled, one report at a time.
  std::mutex progress;
  PlanRequest* sides[2] = {&copying, &dropping};
  // The side's callback: the report, by value, labelled, passed on under the lock.
  const auto label = [&progress](auto& callback, const auto& inner, const char* name) {
    if (!inner) return;
    callback = [&progress, &inner, name](auto report, const auto&... rest) {
      report.plan = name;
      std::lock_guard lock(progress);
      inner(report, rest...);
    };
  };
  for (std::size_t k = 0; k < 2; ++k) {
    label(sides[k]->on_fit_attempt, request.on_fit_attempt, kNames[k]);
    label(sides[k]->on_search_progress, request.on_search_progress, kNames[k]);
  }
  plan::Plan plans[2];
  bool feasible[2] = {false, false};
  parallel_for(2, threads >= 2 ? 2 : 1, [&](std::size_t k) {
    StageScope stage(kNames[k]);
    plans[k] = plan_stages(*sides[k]);
    feasible[k] = keeping_discards(request, plans[k]);
  });
  const bool take_dropped =
      feasible[1] && (!feasible[0] || plans[1].predicted.step_time_ns < plans[0].predicted.step_time_ns);
  if (request.on_note && (feasible[0] || feasible[1])) {
    const auto figure = [&](std::size_t k) {
      return feasible[k] ? fmt::format("{:.4f}", plans[k].predicted.overhead) : std::string("not feasible");
    };
    const std::size_t kept = take_dropped ? 1 : 0;
    request.on_note(fmt::format("kept the plan {} ({}), judged with discard copies; the plan {}: {}", kNames[kept],
                                figure(kept), kNames[1 - kept], figure(1 - kept)));
  }
  return std::move(plans[take_dropped ? 1 : 0]);
}

}  // namespace delta::planner
