// Revivals held no longer than their readers need. The offline replay ends a revival only
// when memory runs short, and the polish afterwards turns some of the regenerations that read
// a revived block into swaps; either way a revived block can stay on the device after its last
// reader, holding memory other evictions could use. This ends each revival with the last
// replay that reads it and removes the revivals no replay reads: no simulation needed, since
// the plan only holds less. Retentions (blocks kept past the program's free for replays) are
// trimmed the same way.
#pragma once

#include "common/plan_edits.hpp"

namespace delta::planner {

// Returns how many revivals and retentions were shortened or removed.
std::size_t trim_revivals(const TraceIndex& index, plan::Plan& plan);

}  // namespace delta::planner
