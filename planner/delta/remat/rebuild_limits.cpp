// Which version of which block the offline rematerialisation can rebuild by replay, until
// which op, at what compute (offline_remat.hpp).
#include "delta/remat/offline_remat.hpp"

#include <algorithm>

namespace delta::planner::remat {

void OfflineRemat::compute_rebuild_limits() {
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

}  // namespace delta::planner::remat
