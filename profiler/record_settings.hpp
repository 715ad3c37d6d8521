// The recorder's settings, from the environment:
//   DELTA_MODE=cache|record|run    record: also write a trace; run: execute a plan (src/modes/run_mode.hpp)
//   DELTA_TRACE=path               where the trace goes (default delta-trace.json; .gz compresses)
//   DELTA_RECORD_ITERATIONS=N      iterations to record, N >= 1 (default 2)
//   DELTA_LEARNING_ITERATIONS=L    the first L of them learn directions, 0 <= L <= N (default 0;
//                                  on a GPU only under LD_PRELOAD, docs/directions.md)
// Under torchrun every rank records its own file: when RANK (or else LOCAL_RANK) is set,
// ".rank<R>" goes before the extension (trace.json -> trace.rank3.json).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace delta::profiler {

enum class DeltaMode { cache, record, run, automatic };  // automatic: DELTA_MODE=auto

struct RecordSettings {
  DeltaMode mode = DeltaMode::cache;
  std::string trace_path = "delta-trace.json";  // with the rank already inserted
  std::uint32_t iterations = 2;
  // The first this many recorded iterations also learn the directions of opaque launches
  // (direction_learner.hpp); 0: uses found in launch parameters stay touches.
  std::uint32_t learning_iterations = 0;
  // The program marks every step (delta_step()): iterations are never detected from the
  // launches, which a long periodic set-up (one memset per parameter) could fool.
  bool marks_steps = false;
};

// Looks up one environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup process_environment();

// Throws std::invalid_argument naming the variable and the accepted values.
RecordSettings parse_record_settings(const EnvLookup& env);

// `path` with ".rank<R>" before its extension when RANK or LOCAL_RANK is set; the extension
// is the last suffix of the file name, or the last two when the name ends in ".gz".
// Throws std::invalid_argument when the rank variable is not a non-negative integer.
std::string rank_trace_path(const std::string& path, const EnvLookup& env);

}  // namespace delta::profiler
