#include "running/run_pair_json.hpp"

namespace deltactl {

nlohmann::json run_pair_json(const RunPairContext& context, const delta::execute::ProgramRun& cache,
                             const delta::execute::ProgramRun& run, const delta::execute::Comparison& same) {
  const auto text_or_null = [](const std::string& text) { return text.empty() ? nlohmann::json() : nlohmann::json(text); };
  return {{"trace", context.trace_path},
          {"gpu", context.gpu},
          {"identical", same.identical && run.error.empty()},
          {"first_mismatch", text_or_null(same.first_mismatch)},
          {"error", text_or_null(run.error)},
          {"iterations", context.iterations},
          {"budget_bytes", context.budget_bytes},
          {"budget_ratio", context.budget_ratio},
          {"reserved_peak_bytes", run.reserved_peak_bytes},
          {"cache_reserved_peak_bytes", cache.reserved_peak_bytes},
          {"cache_step_time_ns", cache.step_time_ns},
          {"step_time_ns", run.step_time_ns},
          {"overhead", cache.step_time_ns ? double(run.step_time_ns) / double(cache.step_time_ns) : 0.0},
          {"unmapped_accesses", run.unmapped_accesses},
          {"perturbations", run.perturbations}};
}

}  // namespace deltactl
