#include "delta/sweep/sweep.hpp"

#include "common/early_copies.hpp"
#include "sim/copy_lanes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <set>

namespace delta::planner {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Range add, point query over the live-memory curve.
class Fenwick {
 public:
  explicit Fenwick(std::size_t n) : tree_(n + 2, 0) {}
  void add(std::size_t from, std::size_t to_inclusive, std::int64_t delta) {
    add_at(from, delta);
    add_at(to_inclusive + 1, -delta);
  }
  std::int64_t at(std::size_t i) const {
    std::int64_t sum = 0;
    for (std::size_t k = i + 1; k > 0; k -= k & (~k + 1)) sum += tree_[k];
    return sum;
  }

 private:
  void add_at(std::size_t i, std::int64_t delta) {
    for (std::size_t k = i + 1; k < tree_.size(); k += k & (~k + 1)) tree_[k] += delta;
  }
  std::vector<std::int64_t> tree_;
};

struct Candidate {
  std::uint32_t block;
  std::uint32_t after;   // last use before the gap
  std::uint32_t before;  // next use (op count: end of step)
  bool taken = false;
};

struct Option {
  double cost = kInfinity;
  plan::Interval interval;
  std::uint32_t freed_first = 0, freed_last = 0;  // ops during which the bytes are free
  std::int64_t d2h_start = -1, d2h_length = 0, h2d_start = -1, h2d_length = 0;
  std::uint64_t temporary_bytes = 0;              // regeneration: siblings briefly allocated
  std::vector<std::uint32_t> pinned_inputs;       // regeneration: must be resident at the replay
};

// Long: one class as it was before the planner moved into rooms; cut along its seams next.
class SweepPlanner {
 public:
  SweepPlanner(const PlanRequest& request, const DeltaOptions& options)
      : request_(request), options_(options), index_(*request.index), n_(index_.op_count()),
        memory_(n_), pins_(index_.blocks().size()), freed_(index_.blocks().size()),
        host_copy_until_(index_.blocks().size(), -1) {
    over_prefix_.assign(n_ + 1, 0);
    starts_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) starts_[i] = index_.native_start(i);
    std::vector<std::int64_t> live(index_.native_live_bytes().begin(), index_.native_live_bytes().end());
    std::vector<std::int64_t> discarded(n_ + 1, 0);
    if (options.discard_dead) {
      // Blocks the program still holds after their last read cost nothing to free early.
      for (std::uint32_t b = 0; b < index_.blocks().size(); ++b) {
        const BlockInfo& info = index_.block(b);
        const std::uint32_t last_read = info.uses.empty() ? info.first : info.uses.back();
        if (info.to_end || info.size == 0 || last_read >= info.last) continue;
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

  plan::Plan run() {
    plan::Plan plan = empty_plan(request_, options_.method);
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
    for (std::size_t i = 0; i < n_; ++i) {
      while (next_start < order_.size() && candidates_[order_[next_start]].after + 1 <= i) {
        const std::uint32_t c = order_[next_start++];
        heap.push({static_key(candidates_[c]), c});
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
          popped.push_back(entry);
          Option option = evaluate(candidate, i);
          if (option.cost == kInfinity) continue;
          const double value = score(candidate, option, i);
          if (value < best_score) {
            best_score = value;
            best = entry.second;
            best_option = option;
          }
        }
        if (best_score == kInfinity) {
          for (const Entry& e : popped) heap.push(e);
          if (heap.empty() || popped.empty()) return plan;  // nothing can free this op: the simulator will say where
          // None of the evaluated could serve this op; the next ones may.
          bool any_left = false;
          std::vector<Entry> skipped;
          while (!heap.empty() && skipped.size() < 512) {
            Entry e = heap.top();
            heap.pop();
            skipped.push_back(e);
            const Candidate& candidate = candidates_[e.second];
            if (candidate.taken || candidate.before <= i) continue;
            Option option = evaluate(candidate, i);
            if (option.cost == kInfinity) continue;
            best = e.second;
            best_option = option;
            any_left = true;
            break;
          }
          for (const Entry& e : skipped) heap.push(e);
          if (!any_left) return plan;
        }
        for (const Entry& e : popped)
          if (e.second != best) heap.push(e);
        apply(plan, best, best_option);
      }
    }
    return plan;
  }

 private:
  void build_candidates() {
    for (std::uint32_t b = 0; b < index_.blocks().size(); ++b) {
      const BlockInfo& info = index_.block(b);
      if (info.size == 0 || info.uses.empty()) continue;
      // A block live before the step and first used late (an optimizer's state, used only by
      // its step) is idle from the start: copied out after op 0, back before its first use.
      if (options_.evict_state_before_first_use && idle_before_first_use(info)) candidates_.push_back({b, 0, info.uses.front()});
      for (std::size_t u = 0; u + 1 < info.uses.size(); ++u)
        if (info.uses[u + 1] > info.uses[u] + 1) candidates_.push_back({b, info.uses[u], info.uses[u + 1]});
      if (info.to_end && info.uses.back() + 1 < n_)
        candidates_.push_back({b, info.uses.back(), static_cast<std::uint32_t>(n_)});
    }
    order_.resize(candidates_.size());
    for (std::uint32_t c = 0; c < candidates_.size(); ++c) order_[c] = c;
    std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return candidates_[a].after < candidates_[b].after;
    });
  }

  std::int64_t start_of(std::size_t op) const { return op >= n_ ? index_.native_step_ns() : index_.native_start(op); }

  std::int64_t d2h_time(std::uint64_t bytes) const {
    return transfer_ns(bytes, request_.gpu.d2h_bytes_per_s, request_.gpu.launch_latency_ns);
  }
  std::int64_t h2d_time(std::uint64_t bytes) const {
    return transfer_ns(bytes, request_.gpu.h2d_bytes_per_s, request_.gpu.launch_latency_ns);
  }

  double static_key(const Candidate& c) const {
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

  bool pinned_within(std::uint32_t block, std::uint32_t first, std::uint32_t last) const {
    const std::set<std::uint32_t>& pins = pins_[block];
    auto it = pins.lower_bound(first);
    return it != pins.end() && *it <= last;
  }
  bool freed_at(std::uint32_t block, std::uint32_t op) const {
    for (const auto& [first, last] : freed_[block])
      if (first <= op && op <= last) return true;
    return false;
  }

  Option evaluate(const Candidate& c, std::size_t i) const {
    Option swap, regen;
    if (options_.allow_swap) swap = evaluate_swap(c, i);
    if (options_.allow_regenerate) regen = evaluate_regeneration(c, i);
    switch (options_.policy) {
      case Policy::capuchin: {
        const bool hidden = swap.cost <= 0.01 * double(swap.h2d_length) + 1.0;
        if (hidden || regen.cost == kInfinity) return swap;
        return regen;
      }
      case Policy::delta_public: {
        const std::uint64_t size = index_.block(c.block).size;
        const double round_trip = 2.0 * double(size) / request_.gpu.h2d_bytes_per_s * 1e9;
        Option chosen = (regen.cost != kInfinity && regen.cost < round_trip) ? regen : swap;
        if (chosen.cost == kInfinity) chosen = regen.cost != kInfinity ? regen : swap;
        return chosen;
      }
      case Policy::delta:
        break;
    }
    return regen.cost < swap.cost ? regen : swap;
  }

  double score(const Candidate& c, const Option& option, std::size_t i) const {
    const double size = double(index_.block(c.block).size);
    if (options_.policy == Policy::delta_public) return 1.0 / (size * double(i - c.after));
    const double covered = std::max<std::int64_t>(1, over_prefix_[option.freed_last + 1] - over_prefix_[option.freed_first]);
    return (option.cost + 1.0) / (std::pow(size, options_.size_weight) * covered);
  }

  Option evaluate_swap(const Candidate& c, std::size_t i) const {
    const BlockInfo& info = index_.block(c.block);
    Option option;
    // A host copy still valid (swapped in earlier and not written since) makes eviction free.
    bool clean = false;
    if (host_copy_until_[c.block] >= 0) {
      auto w = std::upper_bound(info.writes.begin(), info.writes.end(), static_cast<std::uint32_t>(host_copy_until_[c.block]) - 1);
      clean = w == info.writes.end() || *w > c.after;
    }
    const std::int64_t out = clean ? 0 : d2h_time(info.size);
    const std::int64_t in = h2d_time(info.size);
    // The copy starts once the data is final (its last write), after any earlier interval has
    // brought the block back.
    std::uint32_t resident_from = 0;
    for (const auto& [first_free, last_free] : freed_[c.block])
      if (last_free < c.after) resident_from = std::max(resident_from, last_free + 1);
    const std::uint32_t copy_from = earliest_copy_out(index_, c.block, c.after, resident_from);
    const std::int64_t s1 = clean ? index_.native_end(c.after) : d2h_.find_forward_or_queue(index_.native_end(copy_from), out);
    const std::int64_t e1 = s1 + out;
    std::uint32_t f = static_cast<std::uint32_t>(std::lower_bound(starts_.begin(), starts_.end(), e1) - starts_.begin());
    f = std::max<std::uint32_t>(f, c.after + 1);
    // A regeneration chosen earlier may need this block resident at some op of the gap: the
    // block must then be back by the first such op after i (and none may fall before i).
    std::uint32_t limit = c.before;
    {
      const std::set<std::uint32_t>& pins = pins_[c.block];
      auto pin = pins.lower_bound(c.after + 1);
      if (pin != pins.end() && *pin <= i) return option;
      if (pin != pins.end() && *pin < limit) limit = *pin;
    }
    const std::int64_t deadline = start_of(limit);
    std::uint32_t j = limit;  // prefetch op
    std::int64_t s2 = -1;
    if (options_.hide_prefetch) {
      s2 = h2d_.find_backward(deadline, in, e1);
      if (s2 >= 0) j = static_cast<std::uint32_t>(std::max<std::size_t>(index_.op_at_time(s2), c.after + 1));
    }
    double cost = 0;
    std::uint32_t first = f, after_last = j;  // freed over [first, after_last)
    if (first > i) {  // the copy out must be waited for
      cost += double(e1 - start_of(i));
      first = static_cast<std::uint32_t>(i);
    }
    if (after_last <= i) {  // the copy in is issued late
      after_last = static_cast<std::uint32_t>(i + 1);
    }
    const std::int64_t issue = std::max(start_of(after_last), e1);
    const std::int64_t h2d_start = (s2 >= 0 && after_last == j) ? s2 : h2d_.find_forward_or_queue(issue, in);
    cost += double(std::max<std::int64_t>(0, h2d_start + in - deadline));
    if (after_last > limit || first >= after_last) return option;
    option.cost = cost * options_.exposed_swap_factor + 0.01 * double(in);  // a hidden swap still uses the link
    option.interval.action = plan::Action::swap;
    option.interval.release_after = c.after;
    option.interval.prefetch_at = after_last;
    if (!clean && copy_from < c.after) option.interval.copy_after = copy_from;
    option.interval.needed_by = c.before;
    option.freed_first = first;
    option.freed_last = after_last - 1;
    option.d2h_start = clean ? -1 : s1;
    option.d2h_length = out;
    option.h2d_start = h2d_start;
    option.h2d_length = in;
    return option;
  }

  // Rebuilds `block` before op `at`: its version chain (producer and in-place updates since),
  // preceded by the chains of whatever those ops read that is not resident then (up to
  // options_.max_chain ops in all). Appends to `chain` and collects the resident inputs that
  // must stay (`inputs`) and the blocks the replays write (`rebuilt`).
  bool build_chain(std::uint32_t block, std::uint32_t at, std::vector<std::uint64_t>& chain,
                   std::vector<std::uint32_t>& inputs, std::vector<std::uint32_t>& rebuilt) const {
    const std::vector<std::uint32_t> versions = index_.version_chain(block, at);
    if (versions.empty()) return false;
    for (std::uint32_t op : versions) {
      if (std::find(chain.begin(), chain.end(), op) != chain.end()) continue;
      for (const OpUse& u : index_.uses(op)) {
        if (!u.read || u.block == block) continue;
        if (!index_.unchanged_between(u.block, op, at)) return false;  // the op read an older version
        if (std::find(rebuilt.begin(), rebuilt.end(), u.block) != rebuilt.end()) continue;
        const BlockInfo& input = index_.block(u.block);
        const bool resident = input.first <= at && at <= input.last && !freed_at(u.block, at) && !freed_at(u.block, at - 1);
        if (resident) {
          inputs.push_back(u.block);
          continue;
        }
        if (chain.size() + 1 >= options_.max_chain || !build_chain(u.block, at, chain, inputs, rebuilt)) return false;
      }
      if (chain.size() >= options_.max_chain) return false;
      chain.push_back(op);
      for (const OpUse& u : index_.uses(op))
        if (u.write) rebuilt.push_back(u.block);
    }
    return true;
  }

  Option evaluate_regeneration(const Candidate& c, std::size_t) const {
    Option option;
    if (c.before >= n_) return option;
    const std::uint32_t first = c.after + 1, last = c.before - 1;
    if (pinned_within(c.block, first, last)) return option;
    std::vector<std::uint64_t> chain;
    std::vector<std::uint32_t> inputs, rebuilt;
    if (!build_chain(c.block, c.before, chain, inputs, rebuilt)) return option;
    std::sort(chain.begin(), chain.end());  // the trace's own order satisfies every dependency
    std::uint64_t temporary = 0;
    for (std::uint32_t b : rebuilt) {
      if (b == c.block) continue;
      const BlockInfo& other = index_.block(b);
      if (!(other.first <= c.before && c.before <= other.last) || freed_at(b, c.before)) temporary += other.size;
    }
    double cost = 0;
    for (std::uint64_t op : chain) cost += double(index_.duration(op));
    std::sort(inputs.begin(), inputs.end());
    inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
    option.cost = cost;
    option.interval.action = plan::Action::regenerate;
    option.interval.release_after = c.after;
    option.interval.needed_by = c.before;
    option.interval.replay = chain;
    for (std::uint32_t b : inputs) option.interval.inputs.push_back(index_.block(b).id);
    option.pinned_inputs = inputs;
    option.freed_first = first;
    option.freed_last = last;
    option.temporary_bytes = temporary;
    return option;
  }

  void apply(plan::Plan& plan, std::uint32_t c, const Option& option) {
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

  const PlanRequest& request_;
  const DeltaOptions& options_;
  const TraceIndex& index_;
  const std::size_t n_;
  Fenwick memory_;
  std::vector<std::int64_t> over_prefix_;
  std::vector<Candidate> candidates_;
  std::vector<std::uint32_t> order_;
  std::vector<std::set<std::uint32_t>> pins_;
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> freed_;
  std::vector<std::int64_t> host_copy_until_;
  std::vector<std::uint32_t> discards_;
  CopyLane d2h_, h2d_;
  std::vector<std::int64_t> starts_;
};

}  // namespace

plan::Plan plan_with_sweep(const PlanRequest& request, const DeltaOptions& options) {
  return SweepPlanner(request, options).run();
}

}  // namespace delta::planner
