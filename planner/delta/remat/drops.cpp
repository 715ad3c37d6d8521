// Which resident blocks the offline rematerialisation drops when an op does not fit
// (offline_remat.hpp): the least estimated rebuild cost per byte per time to the next need.
#include "delta/remat/offline_remat.hpp"

#include <algorithm>
#include <cmath>

namespace delta::planner::remat {

std::uint32_t OfflineRemat::sibling_need(std::uint32_t b, std::uint32_t j, std::uint32_t need_b) const {
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

std::uint32_t OfflineRemat::revival_need(std::uint32_t y, std::uint32_t j) const {
  std::uint32_t need = kForever;
  for (std::uint32_t r : index_.block(y).uses)
    for (const OpUse& u : index_.uses(r))
      if (u.write && u.block != y && state_[u.block] == State::dropped) need = std::min(need, next_need(u.block, j));
  return need;
}

double OfflineRemat::rebuild_cost_of(std::uint32_t b, std::size_t slot, int depth) const {
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

double OfflineRemat::children_cost(std::uint32_t b, std::uint32_t j) const {
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

void OfflineRemat::offer_siblings(std::uint32_t victim, std::uint32_t j, std::vector<std::pair<double, std::uint32_t>>& heap) {
  const std::uint32_t w = sole_writer(victim, j);
  const std::uint32_t need_v = next_need(victim, j);
  if (w == kForever || need_v == kForever) return;
  for (const OpUse& u : index_.uses(w)) {
    const std::uint32_t t = u.block;
    if (!u.write || t == victim || state_[t] != State::resident || revived_[t] || sole_writer(t, j) != w ||
        !may_move(request_, index_.block(t)))
      continue;
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

bool OfflineRemat::make_room(std::int64_t bytes, std::uint32_t j) {
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

}  // namespace delta::planner::remat
