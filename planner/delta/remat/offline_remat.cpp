#include "delta/remat/remat.hpp"

#include <algorithm>
#include <functional>
#include <cmath>
#include <limits>

namespace delta::planner {
namespace {

constexpr std::uint32_t kForever = std::numeric_limits<std::uint32_t>::max();

enum class State : std::uint8_t { dead, resident, dropped };

// Long: one class as it was before the planner moved into rooms; cut along its seams next.
class OfflineRemat {
 public:
  OfflineRemat(const PlanRequest& request, const RematOptions& options)
      : request_(request), options_(options), index_(*request.index), n_(index_.op_count()),
        blocks_(index_.blocks().size()) {
    discard_after_.resize(n_);
    if (options_.discard_dead)
      for (std::uint32_t b = 0; b < blocks_; ++b) {
        const BlockInfo& info = index_.block(b);
        if (info.to_end || info.size == 0 || last_read(b) >= info.last) continue;
        discard_after_[last_read(b)].push_back(b);
      }
    compute_rebuild_limits();
    chain_limit_.clear();
    chain_limit_.shrink_to_fit();
    pinned_from_.assign(blocks_, kForever);
    pinned_until_.assign(blocks_, 0);
  }

  // Greedy drops can strand an op: a block dropped long before turns out to need a rebuild
  // whose temporaries do not fit. Then the blocks that op needed are pinned (not dropped
  // before it) and the step is planned again, a bounded number of times.
  plan::Plan run() {
    plan::Plan plan;
    for (std::size_t restart = 0;; ++restart) {
      plan = empty_plan(request_, options_.method);
      plan_ = &plan;
      if (n_ == 0 || index_.native_peak() <= request_.budget_bytes) return plan;
      reset();
      std::uint32_t failed = kForever;
      for (std::uint32_t j = 0; j <= n_; ++j)
        if (!step(j)) {
          failed = j;  // the simulator names the op that does not fit
          break;
        }
      end_revivals();
      if (failed == kForever || restart == options_.max_restarts || !pin_for(failed)) return plan;
    }
  }

 private:
  void reset() {
    state_.assign(blocks_, State::dead);
    dropped_at_.assign(blocks_, 0);
    pool_slot_.assign(blocks_, -1);
    pool_.clear();
    last_access_.assign(blocks_, 0);
    target_stamp_.assign(blocks_, kForever);
    lock_stamp_.assign(blocks_, kForever);
    use_stamp_.assign(blocks_, kForever);
    temp_stamp_.assign(blocks_, kForever);
    seq_last_read_.assign(blocks_, 0);
    seq_stamp_.assign(blocks_, kForever);
    chain_stamp_.assign(n_ + 1, kForever);
    chain_id_ = chains_started_ = 0;
    writes_before_.assign(blocks_, 0);
    uses_before_.assign(blocks_, 0);
    advanced_to_ = 0;
    peak_rounds_ = 0;
    step_intervals_.clear();
    step_targets_.clear();
    failed_needs_.clear();
    revived_.assign(blocks_, false);
    revived_list_.clear();
    scan_start_ = 0;
    memory_ = 0;
    for (std::uint32_t b = 0; b < blocks_; ++b)
      if (index_.block(b).from_start) make_resident(b);
  }

  // Pins what op j needed when it failed: first the blocks it reads itself, and when those
  // are pinned already, the inputs its replays restored. False when nothing new is pinned.
  bool pin_for(std::uint32_t j) {
    for (const std::vector<std::uint32_t>* blocks : {&failed_needs_, &failed_restored_}) {
      bool pinned = false;
      for (std::uint32_t b : *blocks) {
        // The window from the drop that stranded op j to op j; drops elsewhere stay free.
        const std::uint32_t from = std::min(pinned_from_[b], dropped_at_[b] + 1);
        if (pinned_until_[b] >= j && pinned_from_[b] <= from) continue;
        pinned_from_[b] = from;
        pinned_until_[b] = std::max(pinned_until_[b], j);
        pinned = true;
      }
      if (pinned) return true;
    }
    return false;
  }

  // For every version of every block (its data after k writes), whether it can be rebuilt by
  // replaying its version chain, the compute that costs, and the last op before which that
  // works: nothing the chain reads may change in between, inputs that cannot be rebuilt must
  // still be allocated, and the version must not have been overwritten. Versions are filled
  // in trace order, so the limits of a chain's inputs are known when it is reached.
  void compute_rebuild_limits() {
    version_base_.assign(blocks_ + 1, 0);
    for (std::uint32_t b = 0; b < blocks_; ++b)
      version_base_[b + 1] = version_base_[b] + static_cast<std::uint32_t>(index_.block(b).writes.size()) + 1;
    const std::size_t total = version_base_[blocks_];
    version_limit_.assign(total, 0);
    version_compute_.assign(total, 0);
    version_ok_.assign(total, false);
    chain_limit_.assign(total, 0);
    std::vector<std::pair<std::uint32_t, std::uint32_t>> order;  // (write op, block)
    for (std::uint32_t b = 0; b < blocks_; ++b) {
      const BlockInfo& info = index_.block(b);
      if (info.producer < 0 || info.from_start || info.size == 0) continue;
      if (info.category == trace::Category::parameter || info.category == trace::Category::input) continue;
      for (std::uint32_t w : info.writes) order.push_back({w, b});
    }
    std::sort(order.begin(), order.end());
    for (const auto& [w, b] : order) {
      const BlockInfo& info = index_.block(b);
      const std::uint32_t k = index_.version_at(b, w) + 1;  // the version this write makes
      const std::size_t slot = version_base_[b] + k;
      const OpUse* use = index_.use_at(w, b);
      const bool in_place = use && use->read;
      if (in_place && !version_ok_[slot - 1]) continue;  // nothing to update in place
      std::uint32_t limit = in_place ? chain_limit_[slot - 1] : kForever;
      std::int64_t compute = (in_place ? version_compute_[slot - 1] : 0) + index_.duration(w);
      for (const OpUse& u : index_.uses(w)) {
        if (!u.read || u.block == b) continue;
        if (u.write) {  // updates another block in place: a replay would need its old data
          limit = 0;
          break;
        }
        const BlockInfo& input = index_.block(u.block);
        auto next = std::upper_bound(input.writes.begin(), input.writes.end(), w);
        if (next != input.writes.end()) limit = std::min(limit, *next);
        const std::uint32_t allocated_until =
            input.to_end ? kForever : (options_.discard_dead ? last_read(u.block) : input.last);
        const std::size_t input_slot = version_base_[u.block] + u.version;
        if (version_ok_[input_slot])
          limit = std::min(limit, std::max(version_limit_[input_slot], allocated_until));
        else
          limit = std::min(limit, allocated_until);
      }
      if (limit <= w) continue;
      chain_limit_[slot] = limit;
      // Past the next write this version no longer exists.
      const std::uint32_t overwritten = k < info.writes.size() ? info.writes[k] : kForever;
      version_limit_[slot] = std::min(limit, overwritten);
      version_compute_[slot] = compute;
      version_ok_[slot] = true;
    }
  }

  // The last op that uses the block (the op it is allocated at when none does).
  std::uint32_t last_read(std::uint32_t b) const {
    const BlockInfo& info = index_.block(b);
    return info.uses.empty() ? info.first : info.uses.back();
  }

  // The slot of the block's data as op j sees it.
  // At the op the sweep has reached the counts kept as it advances serve without a search.
  std::size_t slot_at(std::uint32_t b, std::uint32_t j) const {
    return version_base_[b] + (j == advanced_to_ ? writes_before_[b] : index_.version_at(b, j));
  }
  bool rebuildable_at(std::uint32_t b, std::uint32_t j) const {
    const std::size_t slot = slot_at(b, j);
    return version_ok_[slot] && j <= version_limit_[slot];
  }
  bool rebuildable_block(std::uint32_t b) const {
    for (std::size_t slot = version_base_[b]; slot < version_base_[b + 1]; ++slot)
      if (version_ok_[slot]) return true;
    return false;
  }

  std::int64_t start_of(std::uint32_t op) const { return op >= n_ ? index_.native_step_ns() : index_.native_start(op); }

  void make_resident(std::uint32_t b) {
    state_[b] = State::resident;
    memory_ += static_cast<std::int64_t>(index_.block(b).size);
    if (rebuildable_block(b) && pool_slot_[b] < 0) {
      pool_slot_[b] = static_cast<std::int64_t>(pool_.size());
      pool_.push_back(b);
    }
  }

  void leave_pool(std::uint32_t b) {
    const std::int64_t slot = pool_slot_[b];
    if (slot < 0) return;
    pool_[slot] = pool_.back();
    pool_slot_[pool_[slot]] = slot;
    pool_.pop_back();
    pool_slot_[b] = -1;
  }

  // The next op at or after `from` that uses the block; the end of the step for blocks that
  // outlive it; kForever when it is not needed again.
  std::uint32_t next_need(std::uint32_t b, std::uint32_t from) const {
    const BlockInfo& info = index_.block(b);
    auto it = from == advanced_to_ ? info.uses.begin() + uses_before_[b]
                                   : std::lower_bound(info.uses.begin(), info.uses.end(), from);
    if (it != info.uses.end()) return *it;
    return info.to_end ? static_cast<std::uint32_t>(n_) : kForever;
  }

  // Moves the per-block counts (writes and uses before the op) up to op j.
  void advance_to(std::uint32_t j) {
    for (; advanced_to_ < j && advanced_to_ < n_; ++advanced_to_)
      for (const OpUse& u : index_.uses(advanced_to_)) {
        ++uses_before_[u.block];
        if (u.write) ++writes_before_[u.block];
      }
    advanced_to_ = j;
  }

  // Most bytes the replays before op j hold at once besides their targets: what they write
  // that is not a target (a temporary, or scratch for resident data), from its write to its
  // last read in the sequence the simulator runs.
  std::int64_t replay_peak(std::uint32_t j) {
    if (step_intervals_.empty()) return 0;
    // Stamps are per call, not per op: a retry at the same op must count everything afresh.
    const std::uint32_t round = ++peak_rounds_;
    std::vector<const plan::Interval*> intervals;
    for (const plan::Interval& x : step_intervals_) intervals.push_back(&x);
    const std::vector<std::uint64_t> sequence = replay_order(intervals);
    for (std::size_t k = 0; k < sequence.size(); ++k)
      for (const OpUse& u : index_.uses(sequence[k]))
        if (u.read) {
          seq_last_read_[u.block] = static_cast<std::uint32_t>(k);
          seq_stamp_[u.block] = round;
        }
    std::int64_t live = 0, peak = 0;
    std::vector<std::uint32_t> held;
    for (std::size_t k = 0; k < sequence.size(); ++k) {
      for (const OpUse& u : index_.uses(sequence[k])) {
        if (!u.write || target_stamp_[u.block] == attempt_ || temp_stamp_[u.block] == round) continue;
        temp_stamp_[u.block] = round;
        live += static_cast<std::int64_t>(index_.block(u.block).size);
        held.push_back(u.block);
      }
      peak = std::max(peak, live);
      for (auto it = held.begin(); it != held.end();) {
        const bool read_later = seq_stamp_[*it] == round && seq_last_read_[*it] > k;
        if (!read_later) {
          live -= static_cast<std::int64_t>(index_.block(*it).size);
          it = held.erase(it);
        } else {
          ++it;
        }
      }
    }
    return peak;
  }

  // Op j under the budget: restore what it uses, then drop what must go. When that fails with
  // restored replay inputs kept resident, try again rebuilding them as temporaries instead.
  bool step(std::uint32_t j) {
    advance_to(j);
    restore_inputs_now_ = options_.restore_inputs;
    if (attempt(j)) return true;
    if (options_.restore_inputs) {
      roll_back(j);
      restore_inputs_now_ = false;
      if (attempt(j)) return true;
    }
    failed_restored_.clear();
    for (const auto& [b, recorded] : step_targets_) failed_restored_.push_back(b);
    return false;
  }

  // Undoes the restorations of a failed attempt at op j (drops it made stay: they were
  // released after op j - 1 and will be restored where needed).
  void roll_back(std::uint32_t j) {
    for (auto it = step_targets_.rbegin(); it != step_targets_.rend(); ++it) {
      const auto [b, recorded] = *it;
      if (state_[b] != State::resident) continue;
      state_[b] = revived_[b] ? State::dead : State::dropped;
      if (revived_[b]) forget_revival(b);
      memory_ -= static_cast<std::int64_t>(index_.block(b).size);
      leave_pool(b);
      target_stamp_[b] = kForever;
      if (!recorded) continue;
      auto decision = find_decision(*plan_, index_.block(b).id);
      if (decision == plan_->decisions.end() || decision->intervals.empty() || decision->intervals.back().needed_by != j) continue;
      decision->intervals.pop_back();
      if (decision->intervals.empty()) plan_->decisions.erase(decision);
    }
    step_targets_.clear();
    step_intervals_.clear();
  }

  bool attempt(std::uint32_t j) {
    ++attempt_;
    step_intervals_.clear();
    step_targets_.clear();
    std::vector<std::uint32_t> needed;
    if (j < n_) {
      for (const OpUse& u : index_.uses(j)) {
        lock_stamp_[u.block] = attempt_;
        use_stamp_[u.block] = j;
        last_access_[u.block] = start_of(j);
        if (state_[u.block] == State::dropped) needed.push_back(u.block);
      }
    } else {
      for (std::uint32_t b = 0; b < blocks_; ++b)
        if (index_.block(b).to_end && state_[b] == State::dropped) needed.push_back(b);
    }
    failed_needs_ = needed;
    for (std::uint32_t b : needed)
      if (!restore(b, j)) return false;
    if (!restore_siblings(j)) return false;
    const std::int64_t temporary = replay_peak(j);
    std::int64_t allocated = 0;
    if (j < n_)
      for (std::uint32_t b : index_.allocated_at(j)) allocated += static_cast<std::int64_t>(index_.block(b).size);
    const std::int64_t budget = static_cast<std::int64_t>(request_.budget_bytes);
    const std::int64_t excess = memory_ + std::max(temporary, allocated) - budget;
    if (excess > 0 && !make_room(excess, j)) return false;
    if (j == n_) return true;
    for (std::uint32_t b : index_.allocated_at(j)) {
      make_resident(b);
      last_access_[b] = start_of(j);
    }
    for (std::uint32_t b : index_.freed_after(j)) {
      if (state_[b] == State::resident) memory_ -= static_cast<std::int64_t>(index_.block(b).size);
      state_[b] = State::dead;
      leave_pool(b);
    }
    for (std::uint32_t b : discard_after_[j]) {
      if (state_[b] != State::resident) continue;
      memory_ -= static_cast<std::int64_t>(index_.block(b).size);
      state_[b] = State::dead;
      leave_pool(b);
      plan::Interval discard;
      discard.action = plan::Action::discard;
      discard.release_after = j;
      add_interval(*plan_, index_, b, std::move(discard));
    }
    return true;
  }

  // True when block b can be restored before op j and stay, besides op j's own allocations,
  // without dropping anything.
  bool fits(std::uint32_t b, std::uint32_t j) const {
    std::int64_t allocated = 0;
    if (j < n_)
      for (std::uint32_t a : index_.allocated_at(j)) allocated += static_cast<std::int64_t>(index_.block(a).size);
    const double reserve = options_.restore_headroom * double(index_.block(b).size);  // for the replays' temporaries
    return double(memory_ + allocated) + double(index_.block(b).size) + reserve <= double(request_.budget_bytes);
  }

  // Rebuilds dropped block `b` just before op j as its own regeneration interval.
  bool restore(std::uint32_t b, std::uint32_t j) {
    if (state_[b] == State::resident) return true;
    if (!rebuildable_at(b, j)) return false;
    plan::Interval interval;
    interval.action = plan::Action::regenerate;
    interval.release_after = dropped_at_[b];
    interval.needed_by = j;
    return rebuild(b, j, std::move(interval));
  }

  // The replays before op j also write other dropped blocks (a dropout's mask beside its
  // output): those needed soon are kept from the same replay, as targets of their own,
  // rather than replayed again where they are needed.
  bool restore_siblings(std::uint32_t j) {
    if (!sibling_on() || step_intervals_.empty()) return true;
    std::vector<std::uint64_t> replayed;
    for (const plan::Interval& x : step_intervals_) replayed.insert(replayed.end(), x.replay.begin(), x.replay.end());
    std::sort(replayed.begin(), replayed.end());
    replayed.erase(std::unique(replayed.begin(), replayed.end()), replayed.end());
    const std::int64_t horizon = start_of(j) + sibling_window();
    for (std::uint64_t op : replayed)
      for (const OpUse& u : index_.uses(static_cast<std::uint32_t>(op))) {
        const std::uint32_t s = u.block;
        if (!u.write || state_[s] != State::dropped || !rebuildable_at(s, j)) continue;
        const std::uint32_t need = next_need(s, j);
        if (need == kForever || start_of(need) > horizon || !fits(s, j)) continue;
        const std::vector<std::uint32_t> chain = index_.version_chain(s, j);
        if (!std::all_of(chain.begin(), chain.end(), [&](std::uint32_t c) { return std::binary_search(replayed.begin(), replayed.end(), c); })) continue;
        if (!restore(s, j)) return false;
      }
    return true;
  }
  bool sibling_on() const { return options_.sibling_window >= 0; }
  std::int64_t sibling_window() const { return std::int64_t(options_.sibling_window * double(index_.native_step_ns())); }

  // The op that wrote block b's data as op j sees it, when that was its only write so far
  // (kForever otherwise). Blocks with the same sole writer are siblings: one replay of it
  // rebuilds them all.
  std::uint32_t sole_writer(std::uint32_t b, std::uint32_t j) const {
    return slot_at(b, j) - version_base_[b] == 1 ? index_.block(b).writes[0] : kForever;
  }

  // A dropped block written by the same single op as block b, needed before b and within the
  // sibling window of it: b then comes back with that block's replay, at no compute. Returns
  // its next need (kForever: none).
  std::uint32_t sibling_need(std::uint32_t b, std::uint32_t j, std::uint32_t need_b) const {
    const std::uint32_t w = sole_writer(b, j);
    if (w == kForever) return kForever;
    std::uint32_t best = kForever;
    for (const OpUse& u : index_.uses(w)) {
      if (!u.write || u.block == b || state_[u.block] != State::dropped || sole_writer(u.block, j) != w) continue;
      const std::uint32_t need = next_need(u.block, j);
      if (need == kForever || need > need_b || start_of(need_b) - start_of(need) > sibling_window()) continue;
      best = std::min(best, need);
    }
    return best;
  }

  // Whether block y, freed by the program before op j, can be rebuilt there as the data
  // (version) a replay reads: its final data, and a chain that still works at j.
  bool revivable(std::uint32_t y, std::uint32_t version, std::uint32_t j) const {
    const BlockInfo& info = index_.block(y);
    if (state_[y] != State::dead || info.to_end || info.last >= j || version != info.writes.size()) return false;
    const std::size_t slot = version_base_[y] + version;
    return version_ok_[slot] && j <= version_limit_[slot];
  }

  // Rebuilds freed block y just before op j and keeps it for later replays (a revival,
  // ended by end_revival).
  bool revive(std::uint32_t y, std::uint32_t j) {
    revived_[y] = true;
    revived_list_.push_back(y);
    plan::Interval interval;
    interval.action = plan::Action::revive;
    // Freed by the program after its last op, or, revived before, after that revival ended
    // (intervals of a block must not overlap).
    interval.release_after = index_.block(y).last;
    if (const plan::Interval* previous = last_revival(y)) interval.release_after = std::max(interval.release_after, previous->until);
    interval.needed_by = interval.until = j;
    return rebuild(y, j, std::move(interval));
  }

  // Makes block b resident just before op j as a target of the replays there, replaying its
  // version chain (and what that chain needs) into `interval`, which joins the plan.
  bool rebuild(std::uint32_t b, std::uint32_t j, plan::Interval interval) {
    make_resident(b);
    target_stamp_[b] = attempt_;
    lock_stamp_[b] = attempt_;
    step_targets_.push_back({b, false});
    const std::size_t target_slot = step_targets_.size() - 1;
    const std::uint64_t outer_chain = chain_id_;
    chain_id_ = ++chains_started_;
    std::vector<std::uint32_t> inputs;
    bool ok = true;
    for (std::uint32_t op : index_.version_chain(b, j))
      if (!(ok = replay(op, b, j, interval.replay, inputs))) break;
    chain_id_ = outer_chain;
    if (!ok) return false;
    std::sort(interval.replay.begin(), interval.replay.end());  // trace order satisfies every dependency
    std::sort(inputs.begin(), inputs.end());
    inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
    for (std::uint32_t input : inputs) interval.inputs.push_back(index_.block(input).id);
    step_intervals_.push_back(interval);
    add_interval(*plan_, index_, b, std::move(interval));
    step_targets_[target_slot].second = true;
    return true;
  }

  // The block's latest revival in the plan, if its last interval is one.
  plan::Interval* last_revival(std::uint32_t y) {
    auto d = find_decision(*plan_, index_.block(y).id);
    if (d == plan_->decisions.end() || d->intervals.empty() || d->intervals.back().action != plan::Action::revive) return nullptr;
    return &d->intervals.back();
  }

  void forget_revival(std::uint32_t y) {
    revived_[y] = false;
    revived_list_.erase(std::find(revived_list_.begin(), revived_list_.end(), y));
  }

  // Frees revived block y after op `until`: its interval ends there.
  void end_revival(std::uint32_t y, std::uint32_t until) {
    forget_revival(y);
    if (plan::Interval* revival = last_revival(y)) revival->until = until;
  }

  // Revivals still held at the end of the step end with its last op.
  void end_revivals() {
    while (!revived_list_.empty()) end_revival(revived_list_.back(), static_cast<std::uint32_t>(n_ - 1));
  }

  // The next op at which a dropped block made from revived block y is needed: where a replay
  // may read y again (kForever: none).
  std::uint32_t revival_need(std::uint32_t y, std::uint32_t j) const {
    std::uint32_t need = kForever;
    for (std::uint32_t r : index_.block(y).uses)
      for (const OpUse& u : index_.uses(r))
        if (u.write && u.block != y && state_[u.block] == State::dropped) need = std::min(need, next_need(u.block, j));
    return need;
  }

  // Appends op p (part of the version chain of block `rebuilding`) to `chain`, preceded by the
  // version chains of what it reads that is gone (freed by the trace) at j; inputs still live
  // but dropped become regenerations of their own.
  bool replay(std::uint32_t p, std::uint32_t rebuilding, std::uint32_t j, std::vector<std::uint64_t>& chain,
              std::vector<std::uint32_t>& inputs) {
    if (chain_stamp_[p] == chain_id_) return true;
    chain_stamp_[p] = chain_id_;
    for (const OpUse& u : index_.uses(p)) {
      if (!u.read) continue;
      const std::uint32_t y = u.block;
      if (y == rebuilding) continue;  // rebuilt by the ops before p in its chain
      if (u.write) return false;      // updates another block in place
      if (state_[y] == State::resident) {
        lock_stamp_[y] = attempt_;
        inputs.push_back(y);
        continue;
      }
      // A dropped input op j does not use is restored (and stays) only while that fits beside
      // op j's own allocations; otherwise it stays dropped, rebuilt inside this chain and freed
      // after its last read there.
      if (state_[y] == State::dropped && (use_stamp_[y] == j || (restore_inputs_now_ && fits(y, j)))) {
        if (!restore(y, j)) return false;
        continue;
      }
      if (options_.revive_inputs && revivable(y, u.version, j)) {
        if (!revive(y, j)) return false;
        continue;
      }
      // Gone at j (freed by the trace, discarded or dropped): rebuild the version p read
      // inside this chain.
      const std::size_t slot = version_base_[y] + u.version;  // the data p read
      if (!version_ok_[slot] || j > version_limit_[slot]) return false;
      for (std::uint32_t op : index_.version_chain(y, p))
        if (!replay(op, y, j, chain, inputs)) return false;
    }
    chain.push_back(p);
    return true;
  }

  // Estimated compute to rebuild b as its version `slot`: its version chain and, `depth` levels
  // down, the chains of what the chain's last op reads that is not resident.
  double rebuild_cost_of(std::uint32_t b, std::size_t slot, int depth) const {
    double cost = double(version_compute_[slot]);
    if (depth <= 0) return cost;
    const std::size_t version = slot - version_base_[b];
    if (version == 0) return cost;
    const std::uint32_t last = index_.block(b).writes[version - 1];
    for (const OpUse& u : index_.uses(last)) {
      if (!u.read || u.block == b || state_[u.block] == State::resident) continue;
      const std::size_t input_slot = version_base_[u.block] + u.version;
      if (!version_ok_[input_slot]) continue;
      const double input_cost = rebuild_cost_of(u.block, input_slot, depth - 1);
      // A freed input that will be revived is rebuilt once for all the blocks made from it.
      const bool shared = options_.share_revived_cost && options_.revive_inputs && state_[u.block] == State::dead;
      const double weight = state_[u.block] == State::dropped ? options_.dropped_input_weight : 1.0;
      cost += weight * (shared ? input_cost / double(std::max<std::size_t>(1, index_.block(u.block).uses.size())) : input_cost);
    }
    return cost;
  }

  // Compute of dropped blocks made from b that are still needed: dropping b as well makes
  // their rebuilds longer (DTR's evicted neighbours, one level down).
  double children_cost(std::uint32_t b, std::uint32_t j) const {
    double cost = 0;
    for (std::uint32_t r : index_.block(b).uses) {
      if (r >= j) break;
      for (const OpUse& u : index_.uses(r)) {
        if (!u.write || u.block == b || state_[u.block] != State::dropped) continue;
        const std::size_t slot = slot_at(u.block, j);
        if (version_ok_[slot]) cost += double(version_compute_[slot]);
      }
    }
    return cost;
  }

  // The time term of a drop score: distance ^ distance_weight, without pow for the weights
  // the portfolio uses.
  double spread(double distance) const {
    const double w = options_.distance_weight;
    return w == 1.0 ? distance : w == 2.0 ? distance * distance : w == 0.5 ? std::sqrt(distance) : std::pow(distance, w);
  }

  // Dropping `victim` at op j: its resident siblings needed soon after it would come back with
  // its replay for free, so they join the heap at the score of a drop without compute.
  void offer_siblings(std::uint32_t victim, std::uint32_t j, std::vector<std::pair<double, std::uint32_t>>& heap) {
    const std::uint32_t w = sole_writer(victim, j);
    const std::uint32_t need_v = next_need(victim, j);
    if (w == kForever || need_v == kForever) return;
    for (const OpUse& u : index_.uses(w)) {
      const std::uint32_t t = u.block;
      if (!u.write || t == victim || state_[t] != State::resident || revived_[t] || sole_writer(t, j) != w) continue;
      if (lock_stamp_[t] == attempt_ || target_stamp_[t] == attempt_ || (pinned_from_[t] <= j && j <= pinned_until_[t])) continue;
      const std::size_t slot = slot_at(t, j);
      if (!version_ok_[slot]) continue;
      const std::uint32_t need = next_need(t, j);
      if (need == kForever || need < need_v || need > version_limit_[slot] || start_of(need) - start_of(need_v) > sibling_window()) continue;
      const double distance = double(start_of(need_v) - start_of(j)) + 1.0;
      heap.push_back({1.0 / (double(index_.block(t).size) * spread(distance)), t});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  }

  // Drops resident blocks (released after op j-1) until `bytes` are free.
  bool make_room(std::int64_t bytes, std::uint32_t j) {
    if (j == 0) return false;
    const std::int64_t now = start_of(j);
    std::vector<std::pair<double, std::uint32_t>> scored;
    while (bytes > 0) {
      // One scan scores a window of the pool; its best blocks are dropped in order until the
      // bytes are free (a new scan only when the window runs out).
      scored.clear();
      const std::size_t count = pool_.size();
      const std::size_t scan = std::min(count, options_.scan_limit);
      for (std::size_t s = 0; s < scan; ++s) {
        const std::uint32_t b = pool_[(scan_start_ + s) % count];
        if (lock_stamp_[b] == attempt_ || target_stamp_[b] == attempt_ || (pinned_from_[b] <= j && j <= pinned_until_[b])) continue;
        const BlockInfo& info = index_.block(b);
        if (info.first >= j) continue;
        const std::uint32_t need = revived_[b] ? revival_need(b, j) : next_need(b, j);
        if (need == kForever) {
          if (revived_[b]) scored.push_back({-1.0, b});  // nothing will read it again: free
          continue;
        }
        // Nothing uses b between j and its next need, so its data then is its data now.
        const std::size_t slot = slot_at(b, j);
        if (!version_ok_[slot] || need > version_limit_[slot]) continue;
        const double size = double(info.size);
        const double distance = options_.score == RematScore::until_next_use
                                    ? double(start_of(need) - now) + 1.0
                                    : double(now - last_access_[b]) + 1.0;
        double cost = rebuild_cost_of(b, slot, options_.rebuild_depth) + 1.0;
        if (options_.children_weight > 0) cost += options_.children_weight * children_cost(b, j);
        double score = cost / (size * spread(distance));
        if (sibling_on())
          if (const std::uint32_t sibling = sibling_need(b, j, need); sibling != kForever) {
            // Rebuilt with its sibling for free, and back from the sibling's need on.
            const double d = options_.score == RematScore::until_next_use ? double(start_of(sibling) - now) + 1.0 : distance;
            score = std::min(score, 1.0 / (size * spread(d)));
          }
        scored.push_back({score, b});
      }
      if (count > scan) scan_start_ = (scan_start_ + scan) % count;
      if (scored.empty()) return false;
      // Usually a few drops cover the bytes: a heap yields them without sorting the window.
      std::make_heap(scored.begin(), scored.end(), std::greater<>());
      while (!scored.empty() && bytes > 0) {
        std::pop_heap(scored.begin(), scored.end(), std::greater<>());
        const std::uint32_t victim = scored.back().second;
        scored.pop_back();
        if (state_[victim] != State::resident) continue;  // scored again as a sibling
        if (sibling_on() && !revived_[victim]) offer_siblings(victim, j, scored);
        state_[victim] = State::dropped;
        dropped_at_[victim] = j - 1;
        if (revived_[victim]) {  // its data is not the program's: freed, not dropped
          state_[victim] = State::dead;
          end_revival(victim, j - 1);
        }
        memory_ -= static_cast<std::int64_t>(index_.block(victim).size);
        bytes -= static_cast<std::int64_t>(index_.block(victim).size);
        leave_pool(victim);
      }
    }
    return true;
  }

  const PlanRequest& request_;
  const RematOptions& options_;
  const TraceIndex& index_;
  const std::size_t n_;
  const std::uint32_t blocks_;
  plan::Plan* plan_ = nullptr;
  std::vector<State> state_;
  std::vector<std::uint32_t> dropped_at_;
  // Per block version (slot = version_base_[block] + writes so far).
  std::vector<std::uint32_t> version_base_, version_limit_, chain_limit_;
  std::vector<std::int64_t> version_compute_;
  std::vector<bool> version_ok_;
  std::vector<std::int64_t> pool_slot_, last_access_;
  std::vector<std::uint32_t> pool_;
  // Stamped with the attempt (targets restored and blocks locked there: a retry at the same op
  // starts afresh) or with the op (blocks the op itself uses).
  std::vector<std::uint32_t> target_stamp_, lock_stamp_, temp_stamp_, use_stamp_;
  std::uint32_t attempt_ = 0;
  std::vector<std::uint32_t> writes_before_, uses_before_;  // per block, before op advanced_to_
  std::uint32_t advanced_to_ = kForever;  // no sweep yet: reset() starts it at op 0
  std::vector<std::uint64_t> chain_stamp_;
  std::uint64_t chain_id_ = 0, chains_started_ = 0;
  std::uint32_t peak_rounds_ = 0;
  std::vector<plan::Interval> step_intervals_;     // the regenerations added before the current op
  std::vector<std::pair<std::uint32_t, bool>> step_targets_;  // blocks restored there; interval recorded?
  bool restore_inputs_now_ = true;
  std::vector<std::uint32_t> seq_last_read_, seq_stamp_;
  std::vector<std::uint32_t> pinned_from_, pinned_until_;   // not dropped in this window
  std::vector<std::uint32_t> failed_needs_, failed_restored_;  // of the last attempt
  std::vector<std::vector<std::uint32_t>> discard_after_;
  std::vector<bool> revived_;                  // rebuilt after the program freed it, for replays
  std::vector<std::uint32_t> revived_list_;
  std::size_t scan_start_ = 0;
  std::int64_t memory_ = 0;
};

}  // namespace

plan::Plan plan_offline_remat(const PlanRequest& request, const RematOptions& options) {
  return OfflineRemat(request, options).run();
}

}  // namespace delta::planner
