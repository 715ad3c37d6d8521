// One iteration of a trace as a trace of its own: what a plan is made for and what the executor
// runs, step after step. Blocks live before the iteration starts become persistent (allocated
// before the trace), blocks live after it ends stay live to its end (carried into the next
// step), and blocks neither used nor live in it are left out.
#include <delta/plan.hpp>
#include <delta/trace.hpp>

#include <algorithm>
#include <string>
#include <unordered_set>

namespace delta::trace {

std::optional<std::uint32_t> default_iteration(const Trace& trace) {
  if (trace.iterations.size() < 2) return std::nullopt;  // one step, or no marks: the whole trace
  return trace.iterations.back().index;
}

Trace slice_iteration(const Trace& trace, std::uint32_t index) {
  const Iteration* found = nullptr;
  for (const Iteration& it : trace.iterations)
    if (it.index == index) found = &it;
  if (found == nullptr) {
    std::string known;
    for (const Iteration& it : trace.iterations) known += (known.empty() ? "" : ", ") + std::to_string(it.index);
    throw TraceError("iteration " + std::to_string(index) + ": the trace has " +
                     (known.empty() ? std::string("no iterations") : "iterations " + known));
  }
  const Iteration& it = *found;
  if (it.first_op >= it.end_op || it.end_op > trace.ops.size())
    throw TraceError("iterations[" + std::to_string(index) + "]: ops [" + std::to_string(it.first_op) + ", " +
                     std::to_string(it.end_op) + ") are not ops of the trace (it has " +
                     std::to_string(trace.ops.size()) + ")");
  Trace out;
  out.version = trace.version;
  out.source = trace.source;
  out.model = trace.model;
  out.gpu = trace.gpu;
  out.allocator_settings = trace.allocator_settings;
  out.metadata = trace.metadata;
  out.metadata["iteration"] = std::to_string(index);
  out.ops.assign(trace.ops.begin() + static_cast<std::ptrdiff_t>(it.first_op),
                 trace.ops.begin() + static_cast<std::ptrdiff_t>(it.end_op));
  const std::int64_t start = it.start_ns, end = it.end_ns;
  // What is made after the step's last launch and used by none of its ops belongs to the next
  // step (its inputs, say), which finds it made before it starts.
  std::int64_t last_start = start;
  std::unordered_set<std::uint64_t> used;
  for (const Op& op : out.ops) {
    last_start = std::max(last_start, op.start_ns);
    for (const BlockUse& use : op.blocks) used.insert(use.block);
  }
  const std::int64_t first_start = out.ops.empty() ? start : out.ops.front().start_ns;
  for (const Block& block : trace.blocks) {
    const bool born_before = block.alloc_ns == kNever || block.alloc_ns < start;
    if (block.alloc_ns != kNever && block.alloc_ns >= end) continue;  // made after the step
    if (block.alloc_ns != kNever && block.alloc_ns > last_start && !used.count(block.id)) continue;
    if (block.free_ns != kNever && block.free_ns <= start) continue;  // gone before it
    // Made before the step and freed before its first op, unused: the last step's, which the
    // program lets go as this one begins (a step marked at its end starts at the marker).
    if (born_before && block.free_ns != kNever && block.free_ns <= first_start && !used.count(block.id)) continue;
    Block kept = block;
    if (born_before) kept.alloc_ns = kNever;
    if (block.free_ns != kNever && block.free_ns >= end) kept.free_ns = kNever;
    out.blocks.push_back(kept);
  }
  // Numbered from 0 again, as in any trace; metadata "iteration" says which one it was.
  for (Op& op : out.ops) op.iteration = 0;
  Iteration only = it;
  only.index = 0;
  only.first_op = 0;
  only.end_op = out.ops.size();
  out.iterations.push_back(only);
  validate(out);
  return out;
}

}  // namespace delta::trace

namespace delta::plan {

trace::Trace plan_step(const trace::Trace& trace, const Plan& plan) {
  if (!plan.trace_iteration) return trace;
  return trace::slice_iteration(trace, *plan.trace_iteration);
}

}  // namespace delta::plan
