// The offline rematerialisation op by op (offline_remat.hpp): each op's needs restored, what
// does not fit dropped, and the step planned again where a drop stranded an op.
#include "delta/remat/offline_remat.hpp"

#include <algorithm>

namespace delta::planner::remat {

OfflineRemat::OfflineRemat(const PlanRequest& request, const RematOptions& options)
    : request_(request), options_(options), index_(*request.index), n_(index_.op_count()),
      blocks_(index_.blocks().size()) {
  discard_after_.resize(n_);
  if (options_.discard_dead)
    for (std::uint32_t b = 0; b < blocks_; ++b) {
      const BlockInfo& info = index_.block(b);
      if (info.to_end || info.size == 0 || last_read(b) >= info.last || !may_move(request_, info)) continue;
      discard_after_[last_read(b)].push_back(b);
    }
  compute_rebuild_limits();
  chain_limit_.clear();
  chain_limit_.shrink_to_fit();
  pinned_from_.assign(blocks_, kForever);
  pinned_until_.assign(blocks_, 0);
}

plan::Plan OfflineRemat::run() {
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

void OfflineRemat::reset() {
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

bool OfflineRemat::pin_for(std::uint32_t j) {
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

void OfflineRemat::advance_to(std::uint32_t j) {
  for (; advanced_to_ < j && advanced_to_ < n_; ++advanced_to_)
    for (const OpUse& u : index_.uses(advanced_to_)) {
      ++uses_before_[u.block];
      if (u.write) ++writes_before_[u.block];
    }
  advanced_to_ = j;
}

bool OfflineRemat::step(std::uint32_t j) {
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

void OfflineRemat::roll_back(std::uint32_t j) {
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

bool OfflineRemat::attempt(std::uint32_t j) {
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
  const std::int64_t budget = budget_at(j);
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

std::int64_t OfflineRemat::replay_peak(std::uint32_t j) {
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

}  // namespace delta::planner::remat

namespace delta::planner {

plan::Plan plan_offline_remat(const PlanRequest& request, const RematOptions& options) {
  return remat::OfflineRemat(request, options).run();
}

}  // namespace delta::planner
