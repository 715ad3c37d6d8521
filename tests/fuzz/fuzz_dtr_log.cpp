// libFuzzer target: any bytes through the DTR op-log loader, then what every command does with
// a log: the trace index, the native step in the simulator, and DTR's runtime at half the peak.
// A TraceError is the expected answer to a bad log; anything else (a crash, a sanitizer report,
// another exception, a hang) is a bug. A log the loader accepts must make a trace that passes
// the trace format's own checks, and whose native step fits its own peak.
#include "baselines/baselines.hpp"
#include "common/plan_edits.hpp"
#include "sim/simulator.hpp"
#include "trace/dtr_loader.hpp"
#include "trace/trace_index.hpp"

#include <delta/device.hpp>
#include <delta/plan.hpp>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace delta;
  trace::Trace trace;
  try {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    trace = planner::parse_dtr_log(in, "fuzz/resnet-1.log");
  } catch (const trace::TraceError&) {
    return 0;
  }
  trace::validate(trace);  // throws (and the fuzzer reports) where the loader let a bad trace through
  trace.gpu.profile = "titanv";
  const planner::TraceIndex index(trace);
  planner::PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  request.budget_bytes = index.native_peak();
  request.threads = 1;
  plan::Plan native = planner::plan_native(request);
  if (!planner::judge(request, native).feasible) std::abort();
  request.budget_bytes = index.native_peak() / 2;
  const planner::SimulationResult dtr = planner::run_dtr(request);
  if (!dtr.feasible && dtr.error.empty()) std::abort();  // a run that fails names its reason
  return 0;
}
