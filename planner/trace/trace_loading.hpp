// One entry point for every trace the planner accepts: DTR op logs directly, anything else
// through the trace reader (JSON, optionally gzip).
#pragma once

#include <delta/trace.hpp>

#include <string>

namespace delta::planner {

// Throws trace::TraceError (or std::runtime_error) naming the file and the problem.
trace::Trace load_any_trace(const std::string& path);

}  // namespace delta::planner
