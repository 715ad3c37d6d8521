// The sweep op by op (sweep_planner.hpp): candidates ordered by a static estimate, the best few
// evaluated exactly wherever live memory exceeds the budget, the cheapest applied.
#include "delta/sweep/sweep_planner.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

namespace delta::planner::sweep {

SweepPlanner::SweepPlanner(const PlanRequest& request, const DeltaOptions& options)
    : request_(request), options_(options), index_(*request.index), n_(index_.op_count()),
      memory_(n_), pins_(index_.blocks().size()), freed_(index_.blocks().size()),
      host_copy_until_(index_.blocks().size(), -1) {
  over_prefix_.assign(n_ + 1, 0);
  starts_.resize(n_);
  for (std::size_t i = 0; i < n_; ++i) starts_[i] = index_.native_start(i);
  std::vector<std::int64_t> live(index_.native_live_bytes().begin(), index_.native_live_bytes().end());
  if (options.seed && !take_seed(*options.seed, live)) return;  // run() hands the seed back
  std::vector<std::int64_t> discarded(n_ + 1, 0);
  if (options.discard_dead) {
    // Blocks the program still holds after their last read cost nothing to free early.
    for (std::uint32_t b = 0; b < index_.blocks().size(); ++b) {
      const BlockInfo& info = index_.block(b);
      if (seeded(b)) continue;
      const std::uint32_t last_read = info.uses.empty() ? info.first : info.uses.back();
      if (info.to_end || info.size == 0 || last_read >= info.last || !may_move(request, info)) continue;
      discarded[last_read + 1] += static_cast<std::int64_t>(info.size);
      discarded[info.last + 1] -= static_cast<std::int64_t>(info.size);
      freed_[b].push_back({last_read + 1, info.last});
      discards_.push_back(b);
    }
  }
  std::int64_t running = 0;
  for (std::size_t i = 0; i < n_; ++i) {
    running += discarded[i];
    live[i] -= running;
    memory_.add(i, i, live[i]);
    over_prefix_[i + 1] = over_prefix_[i] + (live[i] > static_cast<std::int64_t>(request.budget_bytes) ? 1 : 0);
  }
}

// The seed's memory op by op is what it holds in the simulator, replays' temporaries too, with
// no limit (its excess is what the sweep frees); its blocks are its own, and what its replays
// read stays resident where they run. False where the seed does not run even so (a rebuild
// it could not make).
bool SweepPlanner::take_seed(const plan::Plan& seed, std::vector<std::int64_t>& live) {
  SimulationOptions unlimited = simulation_options(request_);
  unlimited.budget_bytes = 0;
  unlimited.through_allocator = false;
  unlimited.record_timeline = true;
  const SimulationResult held = simulate(index_, seed, unlimited);
  if (!held.feasible || held.timeline.size() != n_) return false;
  seed_runs_ = true;
  seeded_.assign(index_.blocks().size(), false);
  for (std::size_t i = 0; i < n_; ++i) live[i] = static_cast<std::int64_t>(held.timeline[i].peak_bytes);
  for (const plan::BlockDecision& decision : seed.decisions) {
    const std::uint32_t b = index_.block_index(decision.block);
    seeded_[b] = true;
    for (const plan::Interval& x : decision.intervals) {
      // Where the seed frees the block (a chain the sweep rebuilds must not count it resident).
      const auto after = static_cast<std::uint32_t>(x.release_after);
      if (x.action == plan::Action::discard) freed_[b].push_back({after + 1, index_.block(b).last});
      if (x.action == plan::Action::regenerate) freed_[b].push_back({after + 1, static_cast<std::uint32_t>(x.needed_by) - 1});
      if (!rebuilds(x)) continue;
      for (std::uint64_t id : x.inputs) {
        const std::uint32_t input = index_.block_index(id);
        pins_[input].insert(static_cast<std::uint32_t>(x.needed_by) - 1);
        pins_[input].insert(static_cast<std::uint32_t>(x.needed_by));
      }
    }
  }
  return true;
}

plan::Plan SweepPlanner::run() {
  // A seed that does not run is handed back as it is, for the simulator to name where it fails.
  if (options_.seed && !seed_runs_) return *options_.seed;
  plan::Plan plan = options_.seed ? *options_.seed : empty_plan(request_, options_.method);
  if (n_ == 0 || index_.native_peak() <= request_.budget_bytes) return plan;
  for (std::uint32_t b : discards_) {
    plan::Interval discard;
    discard.action = plan::Action::discard;
    discard.release_after = freed_[b].front().first - 1;
    add_interval(plan, index_, b, std::move(discard));
  }
  build_candidates();
  using Entry = std::pair<double, std::uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  std::size_t next_start = 0;  // candidates sorted by first idle op
  // State swaps held back until their copy out, booked now, would be done (StateSwaps::
  // within_link): by op, then the candidate's key. Out of the heap meanwhile, so that they do
  // not crowd out the candidates that can serve the op being fixed.
  using Deferred = std::pair<std::uint32_t, Entry>;
  std::priority_queue<Deferred, std::vector<Deferred>, std::greater<>> deferred;
  // True where `option` is a state swap refused only until a later op: then deferred.
  auto defer = [&](const Entry& entry, const Option& option, std::size_t i) {
    if (option.ready_op <= i) return false;
    deferred.push({option.ready_op, entry});
    return true;
  };
  for (std::size_t i = 0; i < n_; ++i) {
    while (next_start < order_.size() && candidates_[order_[next_start]].after + 1 <= i) {
      const std::uint32_t c = order_[next_start++];
      heap.push({static_key(candidates_[c]), c});
    }
    while (!deferred.empty() && deferred.top().first <= i) {
      heap.push(deferred.top().second);
      deferred.pop();
    }
    while (memory_.at(i) > static_cast<std::int64_t>(request_.budget_bytes)) {
      std::vector<Entry> popped;
      std::uint32_t best = 0;
      Option best_option;
      double best_score = kInfinity;
      while (!heap.empty() && static_cast<int>(popped.size()) < options_.candidates_per_step) {
        Entry entry = heap.top();
        heap.pop();
        const Candidate& candidate = candidates_[entry.second];
        if (candidate.taken || candidate.before <= i) continue;  // never useful again
        Option option = evaluate(candidate, i);
        if (defer(entry, option, i)) continue;
        popped.push_back(entry);
        if (option.cost == kInfinity) continue;
        const double value = score(candidate, option, i);
        if (value < best_score) {
          best_score = value;
          best = entry.second;
          best_option = option;
        }
      }
      // Within the link, a state swap whose copy back would still be running at the state's
      // first use is taken only where none of the candidates that rank first can free the op
      // otherwise (late_state_swaps_).
      auto allow_late_state_swaps = [&] {
        if (late_state_swaps_ || options_.state_swaps != StateSwaps::within_link) return false;
        late_state_swaps_ = true;
        return true;
      };
      if (best_score == kInfinity) {
        for (const Entry& e : popped) heap.push(e);
        // Before looking deeper: the candidates that rank first but were refused are the
        // better room (GPT2-XL bfloat16 at 0.7 of its peak: 1.589 in live bytes this way,
        // 1.693 taking deeper candidates first).
        if (allow_late_state_swaps()) continue;
        if (heap.empty() || popped.empty()) {
          if (release_held_back(i, heap)) continue;
          return plan;  // nothing can free this op: the simulator will say where
        }
        // None of the evaluated could serve this op; the next ones may.
        bool any_left = false;
        std::vector<Entry> skipped;
        while (!heap.empty() && skipped.size() < 512) {
          Entry e = heap.top();
          heap.pop();
          const Candidate& candidate = candidates_[e.second];
          if (candidate.taken || candidate.before <= i) continue;  // never useful again
          Option option = evaluate(candidate, i);
          if (defer(e, option, i)) continue;
          skipped.push_back(e);
          if (option.cost == kInfinity) continue;
          best = e.second;
          best_option = option;
          any_left = true;
          break;
        }
        for (const Entry& e : skipped) heap.push(e);
        if (!any_left) {
          if (release_held_back(i, heap)) continue;
          return plan;
        }
      }
      for (const Entry& e : popped)
        if (e.second != best) heap.push(e);
      apply(plan, best, best_option);
    }
    late_state_swaps_ = false;
  }
  return plan;
}

void SweepPlanner::build_candidates() {
  for (std::uint32_t b = 0; b < index_.blocks().size(); ++b) {
    const BlockInfo& info = index_.block(b);
    if (info.size == 0 || info.uses.empty() || seeded(b)) continue;
    if (!may_move(request_, info)) {
      // Parameters the request keeps resident may still go where nothing else can free an op.
      if (info.category != trace::Category::parameter || request_.move_parameters || pinned(request_, info)) continue;
      for (std::size_t u = 0; u + 1 < info.uses.size(); ++u)
        if (info.uses[u + 1] > info.uses[u] + 1) {
          held_back_.push_back(static_cast<std::uint32_t>(candidates_.size()));
          candidates_.push_back({b, info.uses[u], info.uses[u + 1]});
        }
      continue;
    }
    // A block live before the step and first used late (an optimizer's state, used only by
    // its step) is idle from the start: copied out after op 0, back before its first use.
    if (options_.state_swaps != StateSwaps::none && idle_before_first_use(info)) candidates_.push_back({b, 0, info.uses.front(), false, true});
    for (std::size_t u = 0; u + 1 < info.uses.size(); ++u)
      if (info.uses[u + 1] > info.uses[u] + 1) candidates_.push_back({b, info.uses[u], info.uses[u + 1]});
    if (info.to_end && info.uses.back() + 1 < n_)
      candidates_.push_back({b, info.uses.back(), static_cast<std::uint32_t>(n_)});
  }
  order_.clear();
  for (std::uint32_t c = 0, next_held = 0; c < candidates_.size(); ++c) {
    if (next_held < held_back_.size() && held_back_[next_held] == c) {
      ++next_held;
      continue;
    }
    order_.push_back(c);
  }
  std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return candidates_[a].after < candidates_[b].after;
  });
}

// Where the request keeps parameters resident (PlanRequest::move_parameters), their gaps are
// held back until an op that nothing else can free, then offered from there on. Without
// them, where the state and activations alone do not quite make room, every such sweep stops
// and its plan is infeasible: GPT2-XL float32 at 0.594 of its peak went from 2.58 at 0.6 to
// 3.13, the parameters all moving, where a few hundred MB were missing at a few ops.
template <typename Heap>
bool SweepPlanner::release_held_back(std::size_t i, Heap& heap) {
  bool released = false;
  for (std::uint32_t& c : held_back_) {
    if (c == kReleased) continue;
    const Candidate& candidate = candidates_[c];
    if (candidate.after + 1 > i || candidate.before <= i) continue;
    heap.push({static_key(candidate), c});
    c = kReleased;
    released = true;
  }
  return released;
}

double SweepPlanner::static_key(const Candidate& c) const {
  const BlockInfo& info = index_.block(c.block);
  if (options_.policy == Policy::delta_public) return 1.0 / double(info.size);
  const std::int64_t gap = index_.compute_between(c.after + 1, c.before);
  double cost = kInfinity;
  if (options_.allow_swap) cost = std::max<std::int64_t>(0, d2h_time(info.size) + h2d_time(info.size) - gap);
  if (options_.allow_regenerate && info.producer >= 0 && c.before < n_) {
    const std::vector<std::uint32_t> chain = index_.version_chain(c.block, c.before);
    if (!chain.empty()) {
      double compute = 0;
      for (std::uint32_t op : chain) compute += double(index_.duration(op));
      cost = std::min(cost, compute);
    }
  }
  const double covered = std::max<std::int64_t>(1, over_prefix_[c.before] - over_prefix_[c.after + 1]);
  return (cost + 1.0) / (std::pow(double(info.size), options_.size_weight) * covered);
}

double SweepPlanner::score(const Candidate& c, const Option& option, std::size_t i) const {
  const double size = double(index_.block(c.block).size);
  if (options_.policy == Policy::delta_public) return 1.0 / (size * double(i - c.after));
  const double covered = std::max<std::int64_t>(1, over_prefix_[option.freed_last + 1] - over_prefix_[option.freed_first]);
  return (option.cost + 1.0) / (std::pow(size, options_.size_weight) * covered);
}

void SweepPlanner::apply(plan::Plan& plan, std::uint32_t c, const Option& option) {
  Candidate& candidate = candidates_[c];
  candidate.taken = true;
  const std::uint64_t size = index_.block(candidate.block).size;
  memory_.add(option.freed_first, option.freed_last, -static_cast<std::int64_t>(size));
  freed_[candidate.block].push_back({option.freed_first, option.freed_last});
  if (option.interval.action == plan::Action::swap) {
    if (option.d2h_start >= 0) d2h_.reserve(option.d2h_start, option.d2h_length);
    h2d_.reserve(option.h2d_start, option.h2d_length);
    host_copy_until_[candidate.block] = candidate.before;
  } else {
    // The producer's inputs must be resident when it is replayed, just before `before`.
    for (std::uint32_t b : option.pinned_inputs) {
      pins_[b].insert(candidate.before - 1);
      pins_[b].insert(candidate.before);
    }
    if (option.temporary_bytes) memory_.add(candidate.before, candidate.before, static_cast<std::int64_t>(option.temporary_bytes));
  }
  add_interval(plan, index_, candidate.block, option.interval);
}

}  // namespace delta::planner::sweep

namespace delta::planner {

plan::Plan plan_with_sweep(const PlanRequest& request, const DeltaOptions& options) {
  return sweep::SweepPlanner(request, options).run();
}

}  // namespace delta::planner
