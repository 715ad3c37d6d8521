// The fields `deltactl execute` and `deltactl execute --auto|--online` both report for a
// program run twice, in cache mode and under DELTA, and compared (names as `deltactl
// simulate --json` uses them where they mean the same).
#pragma once

#include "tools/execute/program_runner.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace deltactl {

struct RunPairContext {
  std::string trace_path;
  std::string gpu;
  std::size_t iterations = 0;
  std::uint64_t budget_bytes = 0;
  double budget_ratio = 0;
};

nlohmann::json run_pair_json(const RunPairContext& context, const delta::execute::ProgramRun& cache,
                             const delta::execute::ProgramRun& run, const delta::execute::Comparison& same);

}  // namespace deltactl
