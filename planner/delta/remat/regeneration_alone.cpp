// Whether any plan of regenerations alone can fit (remat.hpp).
#include "delta/remat/remat.hpp"

#include <vector>

namespace delta::planner {

bool regeneration_alone_cannot_fit(const PlanRequest& request) {
  if (request.budget_bytes == 0) return false;  // no limit
  const TraceIndex& index = *request.index;
  std::uint64_t kept = 0;  // live before the step and after it
  std::vector<bool> is_kept(index.blocks().size(), false);
  for (std::uint32_t b : index.live_at_start())
    if (index.block(b).to_end) {
      kept += index.block(b).size;
      is_kept[b] = true;
    }
  std::vector<std::size_t> counted_at(index.blocks().size(), index.op_count());  // each block once per op
  for (std::size_t op = 0; op < index.op_count(); ++op) {
    std::uint64_t needed = kept;
    for (const OpUse& u : index.uses(op)) {
      if (is_kept[u.block] || counted_at[u.block] == op) continue;
      counted_at[u.block] = op;
      needed += index.block(u.block).size;
    }
    if (needed > request.budget_bytes) return true;
  }
  return false;
}

}  // namespace delta::planner
