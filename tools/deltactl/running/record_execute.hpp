// `deltactl execute TRACE --record OUT [--opaque] [--truth FILE]`: the trace run as a program
// on the sim device in cache mode, recorded through DELTA's recorder (a record session, as
// DELTA_MODE=record runs it) into OUT. With --opaque every kernel shows only its parameter
// bytes, as on a GPU, and the first iterations learn the directions (profiler/
// direction_learner.hpp); the learned trace is then scored against the sim's ground truth,
// recorded alongside (written to --truth when given).
#pragma once

#include <cstddef>
#include <string>

namespace deltactl {

struct RecordExecuteArgs {
  std::string trace_path;
  std::string out_path;
  std::string truth_path;  // empty: not written
  std::string gpu;         // empty: the trace's
  std::size_t iterations = 3;
  bool opaque = false;
  bool json = false;
};

// Throws ExitStatus when the run fails or a learned direction is unsafe.
void run_record_execute(const RecordExecuteArgs& args);

}  // namespace deltactl
