// `deltactl execute TRACE --auto --budget B` and `--online --budget B`: the trace run as a
// program on the sim device from its first iteration with no plan given, under auto mode (the
// online policy while the recorder records, a plan made in a background thread, the switch at
// a step boundary) or under the online policy alone; compared with cache mode as a planned
// run is (identical data, no access to unmapped memory), the budget held over every iteration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace deltactl {

struct AutoExecuteArgs {
  std::string trace_path;
  std::string kineto;
  std::string budget;      // a fraction of the step's native peak, or bytes; default 0.5
  std::string gpu;
  std::size_t iterations = 8;
  std::optional<std::uint32_t> iteration;
  std::optional<std::uint64_t> perturb;
  std::uint32_t record_iterations = 2;
  std::string plan_cache;  // empty: no cache
  std::string shapes;        // execute::parse_shapes; empty: the traced step every iteration
  std::string slow_kernels;  // "FACTOR@ITERATION"; empty: as traced
  std::uint64_t host_budget = 0;  // pinned host memory, bytes (DELTA_HOST_BUDGET); 0: none on the sim
  std::optional<double> plan_seconds;  // a limit on planning time (DELTA_PLAN_SECONDS); absent: none
  bool online_only = false;
  bool drop_discards = false;
  bool json = false;
};

// Throws ExitStatus: 1 for bad input, 2 when the run differs from cache mode, touches unmapped
// memory or fails.
void run_auto_execute(const AutoExecuteArgs& args);

}  // namespace deltactl
