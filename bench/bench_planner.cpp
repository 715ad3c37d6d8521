// Planning time against trace size: the whole DELTA planner (its candidate plans and the
// simulations that judge them) on layered training-step traces of growing length, at half the
// native peak on the Titan V profile. scripts/bench reports the medians and how time grows.
#include "planner/common/request.hpp"
#include "planner/delta/pipeline.hpp"
#include "planner/trace/synthetic_trace.hpp"
#include "planner/trace/trace_index.hpp"

#include <benchmark/benchmark.h>

namespace {

void BM_plan_delta(benchmark::State& state) {
  const auto layers = static_cast<std::size_t>(state.range(0));
  delta::trace::Trace trace = delta::planner::layered_training_trace(layers);
  delta::planner::TraceIndex index(trace);
  delta::planner::PlanRequest request;
  request.index = &index;
  request.gpu = delta::gpu_profile("titanv");
  request.budget_ratio = 0.5;
  request.budget_bytes = static_cast<std::uint64_t>(double(index.native_peak()) * 0.5);
  for (auto _ : state) benchmark::DoNotOptimize(delta::planner::plan_delta(request));
  state.counters["ops"] = double(trace.ops.size());
  state.SetComplexityN(static_cast<std::int64_t>(trace.ops.size()));
}
BENCHMARK(BM_plan_delta)->Arg(5'000)->Arg(12'500)->Arg(25'000)->Arg(50'000)->Unit(benchmark::kMillisecond)
    ->Complexity();

}  // namespace

BENCHMARK_MAIN();
