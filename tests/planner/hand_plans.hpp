// Plans written by hand for the hand-built traces of tiny_traces.hpp: the simulator's tests
// and the executor's build theirs from these.
#pragma once

#include <delta/plan.hpp>
#include <delta/trace.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace delta::planner::testing {

// An empty plan for `t` (every block kept) on the Titan V profile under `budget`.
inline plan::Plan plan_for(const trace::Trace& t, std::uint64_t budget) {
  plan::Plan p;
  p.method = "test";
  p.trace_hash = plan::trace_fingerprint(t);
  p.trace_ops = t.ops.size();
  p.trace_blocks = t.blocks.size();
  p.gpu_profile = "titanv";
  p.budget_bytes = budget;
  return p;
}

inline plan::Interval swap(std::uint64_t after, std::uint64_t prefetch, std::uint64_t needed) {
  plan::Interval i;
  i.action = plan::Action::swap;
  i.release_after = after;
  i.prefetch_at = prefetch;
  i.needed_by = needed;
  return i;
}

inline plan::Interval regeneration(std::uint64_t after, std::uint64_t needed, std::vector<std::uint64_t> replay,
                                   std::vector<std::uint64_t> inputs = {}) {
  plan::Interval i;
  i.action = plan::Action::regenerate;
  i.release_after = after;
  i.needed_by = needed;
  i.replay = std::move(replay);
  i.inputs = std::move(inputs);
  return i;
}

}  // namespace delta::planner::testing
