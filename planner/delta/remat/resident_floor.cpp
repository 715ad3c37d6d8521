// What the offline rematerialisation can never drop (offline_remat.hpp): where that alone
// fills the budget, every plan it makes fails, and the portfolio need not run it.
#include "delta/remat/offline_remat.hpp"

#include <vector>

namespace delta::planner::remat {

// Block b is dropped over the ops between two of its uses only where make_room (or a
// sibling's drop) may take it there: a candidate of the pool (a version it can rebuild, a
// block the request lets move), whose data there can be rebuilt until its next need. The
// same holds after its last use for a block the step hands on (needed at the end). Elsewhere
// between its allocation, or the step's start for a block live before it, and its last use,
// it stays. Limits computed without discards (RematOptions::discard_dead) are the longest,
// so this holds for every setting.
std::uint64_t OfflineRemat::resident_floor_peak() const {
  const std::size_t n = n_;
  if (n == 0) return 0;
  std::vector<std::int64_t> change(n + 1, 0);
  const auto stays = [&](std::size_t from, std::size_t to, std::uint64_t size) {  // ops [from, to)
    if (from >= to) return;
    change[from] += static_cast<std::int64_t>(size);
    change[to] -= static_cast<std::int64_t>(size);
  };
  for (std::uint32_t b = 0; b < blocks_; ++b) {
    const BlockInfo& info = index_.block(b);
    if (info.size == 0 || info.uses.empty()) continue;
    const bool candidate = rebuildable_block(b) && may_move(request_, info);
    // Whether the block may be away over ops after `used` until its need `need`.
    const auto droppable_after = [&](std::uint32_t used, std::uint32_t need) {
      if (!candidate) return false;
      const std::size_t slot = version_base_[b] + index_.version_at(b, used + 1);
      return version_ok_[slot] && need <= version_limit_[slot];
    };
    if (info.from_start) stays(0, info.uses.front(), info.size);  // never a candidate: nothing rebuilds it
    for (std::size_t u = 0; u + 1 < info.uses.size(); ++u)
      if (!droppable_after(info.uses[u], info.uses[u + 1])) stays(info.uses[u] + 1, info.uses[u + 1], info.size);
    if (info.to_end && !droppable_after(info.uses.back(), static_cast<std::uint32_t>(n)))
      stays(info.uses.back() + 1, n, info.size);
  }
  // Beside them, every block an op uses is resident while it runs (the spans above leave out
  // the ops that use their block).
  std::uint64_t peak = 0;
  std::int64_t staying = 0;
  std::vector<std::size_t> counted_at(blocks_, n);  // each block once per op
  for (std::size_t op = 0; op < n; ++op) {
    staying += change[op];
    std::uint64_t held = static_cast<std::uint64_t>(staying);
    for (const OpUse& u : index_.uses(op)) {
      if (counted_at[u.block] == op) continue;
      counted_at[u.block] = op;
      held += index_.block(u.block).size;
    }
    peak = std::max(peak, held);
  }
  return peak;
}

}  // namespace delta::planner::remat

namespace delta::planner {

bool offline_remat_cannot_fit(const PlanRequest& request) {
  if (request.budget_bytes == 0) return false;  // no limit
  RematOptions longest;
  longest.discard_dead = false;
  return remat::OfflineRemat(request, longest).resident_floor_peak() > request.budget_bytes;
}

}  // namespace delta::planner
