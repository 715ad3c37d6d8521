// libFuzzer target: any bytes through the plan reader, the plan-versus-trace check and the
// simulator, on a small fixed trace. A PlanError, or a simulation that reports the plan
// infeasible, is the expected answer to a bad plan; anything else (a crash, a sanitizer
// report, another exception, a hang) is a bug. The plan's trace fields are overwritten with
// the trace's, so inputs need not guess its fingerprint to reach the simulator. Accepted
// plans must survive a write and re-read unchanged.
#include "sim/simulator.hpp"
#include "tiny_traces.hpp"
#include "trace/trace_index.hpp"

#include <delta/plan.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

using delta::trace::Access;
using delta::planner::testing::block;
using delta::planner::testing::op;

// Blocks 1..6: a parameter W, X made from it and read again, Y updated in place, a
// temporary T freed early, an output Z kept to the end, and Q, freed before the replays
// that read it (for revivals and retentions). Ids in the fuzzed plans are 1..6.
const delta::trace::Trace& fixed_trace() {
  static const delta::trace::Trace trace = [] {
    using delta::trace::Category;
    delta::trace::Trace t;
    t.source = "fuzz";
    t.gpu.profile = "titanv";
    constexpr std::int64_t kMs = 1'000'000;
    constexpr std::int64_t kNever = delta::trace::kNever;
    t.blocks.push_back(block(1, 64 << 20, kNever, kNever, Category::parameter));
    t.blocks.push_back(block(2, 512 << 20, 0, 80 * kMs, Category::activation));
    t.blocks.push_back(block(3, 256 << 20, 10 * kMs, 80 * kMs, Category::activation));
    t.blocks.push_back(block(4, 128 << 20, 20 * kMs, 30 * kMs, Category::activation));
    t.blocks.push_back(block(5, 32 << 20, 30 * kMs, kNever, Category::activation));
    t.blocks.push_back(block(6, 16 << 20, 0, 20 * kMs, Category::activation));
    op(t, "make_x", 10 * kMs, {{1, Access::read}, {2, Access::write}, {6, Access::write}});
    op(t, "make_y", 10 * kMs, {{2, Access::read}, {6, Access::read}, {3, Access::write}});
    op(t, "temp", 10 * kMs, {{4, Access::write}, {3, Access::read}});
    op(t, "update_y", 10 * kMs, {{3, Access::read}, {3, Access::write}, {5, Access::write}});
    op(t, "filler", 20 * kMs, {});
    op(t, "use_x", 10 * kMs, {{2, Access::read}, {5, Access::read}});
    op(t, "use_y", 10 * kMs, {{3, Access::read}, {5, Access::read}, {5, Access::write}});
    return t;
  }();
  return trace;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace delta;
  const trace::Trace& trace = fixed_trace();
  static const planner::TraceIndex index(trace);
  plan::Plan plan;
  try {
    plan = plan::parse_plan(std::string(reinterpret_cast<const char*>(data), size));
    const std::string text = plan::to_json_text(plan);
    if (plan::to_json_text(plan::parse_plan(text)) != text) std::abort();
    plan.trace_hash = plan::trace_fingerprint(trace);
    plan.trace_ops = trace.ops.size();
    plan.trace_blocks = trace.blocks.size();
    plan::check_plan_matches(plan, trace);
  } catch (const plan::PlanError&) {
    return 0;
  }
  planner::SimulationOptions options;
  options.gpu = gpu_profile("titanv");
  options.budget_bytes = plan.budget_bytes;
  const planner::SimulationResult result = planner::simulate(index, plan, options);
  if (!result.feasible && result.error.empty()) std::abort();  // a refusal names its reason
  return 0;
}
