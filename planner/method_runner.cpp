// Runs any method by its name: the one place that knows every planner and baseline, so that
// code needing only what common/ shares (the request and its judge: the fuzzers) does
// not pull in all of them.
#include "methods.hpp"

#include "baselines/baselines.hpp"
#include "delta/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace delta::planner {

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names = {"delta", "native", "vdnn", "capuchin", "dtr",
                                                 "delta-public", "chen", "knapsack", "milp"};
  return names;
}

namespace {

// Why a plan the allocator refuses at the step's first op can hardly be planned around: every
// block live before the step is on the device there (a plan moves nothing before op 0), and
// what is left beside them through the allocator is all op 0 can have (gpt2-large at 0.5 of
// its peak: the parameters and AdamW state are 99.4% of the budget, and the pages of the state
// blocks a plan moves take the rest).
std::string op_zero_note(const PlanRequest& request) {
  const TraceIndex& index = *request.index;
  std::uint64_t before = 0;
  for (std::uint32_t b : index.live_at_start()) before += index.size(b);
  const auto gib = [](std::uint64_t bytes) { return double(bytes) / double(1ull << 30); };
  const std::string share =
      fmt::format("at op 0 every block live before the step is on the device, as no plan moves anything before the step's "
                  "first op: {} blocks, {:.2f} GiB, {:.1f}% of the {:.2f} GiB budget",
                  index.live_at_start().size(), gib(before), 100.0 * double(before) / double(std::max<std::uint64_t>(1, request.budget_bytes)),
                  gib(request.budget_bytes));
  if (before >= request.budget_bytes) return " (" + share + ": more than the budget holds, whatever the plan)";
  return " (" + share +
         "; beside them, and the whole pages of those a plan moves, the allocator cannot place op 0's allocations: only a "
         "plan that moves fewer of them, or a larger budget, leaves room there)";
}

}  // namespace

MethodResult run_method(const std::string& method, const PlanRequest& request) {
  MethodResult result;
  result.method = method;
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  if (request.through_allocator && request.gpu.memory_bytes > 0 && request.budget_bytes > request.gpu.memory_bytes &&
      request.index->native_peak() > request.gpu.memory_bytes) {
    // The allocator cannot reserve past the device: every plan that needs more than the
    // device would fail at some large allocation as if by fragmentation, after planning for
    // nothing. (A step whose native peak fits the device needs no more, whatever the budget.)
    const auto gib = [](std::uint64_t bytes) { return double(bytes) / double(1ull << 30); };
    result.reason = fmt::format(
        "the budget, {0:.2f} GiB, is more than the {1} profile's {2:.2f} GiB of device memory: no run on that GPU can "
        "hold it (give a budget of at most {2:.2f} GiB, another --gpu, or judge in live bytes)",
        gib(request.budget_bytes), request.gpu.name, gib(request.gpu.memory_bytes));
    result.simulation.error = result.reason;
    result.planning_seconds = seconds();
    return result;
  }
  if (method == "dtr") {
    result.simulation = run_dtr(request);
    result.planning_seconds = seconds();
  } else {
    plan::Plan plan;
    if (method == "delta") plan = plan_delta(request);
    else if (method == "native") plan = plan_native(request);
    else if (method == "vdnn") plan = plan_vdnn(request);
    else if (method == "capuchin") plan = plan_capuchin(request);
    else if (method == "delta-public") plan = plan_delta_public(request);
    else if (method == "chen") plan = plan_chen(request);
    else if (method == "knapsack") plan = plan_knapsack(request);
    else if (method == "milp") {
      std::string reason;
      auto milp = plan_milp(request, reason);
      if (!milp) {
        result.reason = reason;
        result.planning_seconds = seconds();
        return result;
      }
      plan = std::move(*milp);
    } else {
      std::string known;
      for (const std::string& name : method_names()) known += (known.empty() ? "" : ", ") + name;
      throw std::invalid_argument("unknown method '" + method + "' (known: " + known + ")");
    }
    result.planning_seconds = seconds();
    result.simulation = judge(as_placed(request, plan), plan);  // the moved blocks placed as the plan was fitted
    result.plan = std::move(plan);
  }
  result.feasible = result.simulation.feasible;
  result.reason = result.simulation.error;
  if (!result.feasible && request.through_allocator && result.simulation.first_bad_op == 0 && !request.index->live_at_start().empty())
    result.reason += op_zero_note(request);
  return result;
}

}  // namespace delta::planner
