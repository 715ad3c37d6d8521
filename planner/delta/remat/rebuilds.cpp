// Rebuilding dropped and freed blocks before an op (offline_remat.hpp): a block's chain of
// replays and what it reads, restored inputs, revivals and siblings, and the replays' peak.
#include "delta/remat/offline_remat.hpp"

#include <algorithm>

namespace delta::planner::remat {

bool OfflineRemat::restore(std::uint32_t b, std::uint32_t j) {
  if (state_[b] == State::resident) return true;
  if (!rebuildable_at(b, j)) return false;
  plan::Interval interval;
  interval.action = plan::Action::regenerate;
  interval.release_after = dropped_at_[b];
  interval.needed_by = j;
  return rebuild(b, j, std::move(interval));
}

bool OfflineRemat::restore_siblings(std::uint32_t j) {
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

bool OfflineRemat::revivable(std::uint32_t y, std::uint32_t version, std::uint32_t j) const {
  const BlockInfo& info = index_.block(y);
  if (state_[y] != State::dead || info.to_end || info.last >= j || version != info.writes.size()) return false;
  const std::size_t slot = version_base_[y] + version;
  return version_ok_[slot] && j <= version_limit_[slot];
}

bool OfflineRemat::revive(std::uint32_t y, std::uint32_t j) {
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

bool OfflineRemat::rebuild(std::uint32_t b, std::uint32_t j, plan::Interval interval) {
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

plan::Interval* OfflineRemat::last_revival(std::uint32_t y) {
  auto d = find_decision(*plan_, index_.block(y).id);
  if (d == plan_->decisions.end() || d->intervals.empty() || d->intervals.back().action != plan::Action::revive) return nullptr;
  return &d->intervals.back();
}

void OfflineRemat::forget_revival(std::uint32_t y) {
  revived_[y] = false;
  revived_list_.erase(std::find(revived_list_.begin(), revived_list_.end(), y));
}

void OfflineRemat::end_revival(std::uint32_t y, std::uint32_t until) {
  forget_revival(y);
  if (plan::Interval* revival = last_revival(y)) revival->until = until;
}

void OfflineRemat::end_revivals() {
  while (!revived_list_.empty()) end_revival(revived_list_.back(), static_cast<std::uint32_t>(n_ - 1));
}

bool OfflineRemat::replay(std::uint32_t p, std::uint32_t rebuilding, std::uint32_t j, std::vector<std::uint64_t>& chain,
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

bool OfflineRemat::fits(std::uint32_t b, std::uint32_t j) const {
  std::int64_t allocated = 0;
  if (j < n_)
    for (std::uint32_t a : index_.allocated_at(j)) allocated += static_cast<std::int64_t>(index_.block(a).size);
  const double reserve = options_.restore_headroom * double(index_.block(b).size);  // for the replays' temporaries
  return double(memory_ + allocated) + double(index_.block(b).size) + reserve <= double(budget_at(j));
}

}  // namespace delta::planner::remat
