// Loads a DTR op log (JSON lines; ../shared/traces/README.md) straight into a trace::Trace:
// the planner's fast path for those logs, and the reference semantics the DTR baseline uses.
#pragma once

#include <delta/trace.hpp>

#include <istream>
#include <string>

namespace delta::planner {

// True when the file's first non-empty line is a JSON object with an "INSTRUCTION" field.
bool looks_like_dtr_log(const std::string& path);

// Storages become blocks (CONSTANT storages: parameters live for the whole step, never freed);
// CALL and MUTATE become ops that read their arguments' storages and write their fresh results
// (MUTATE: read and write the mutated arguments in place). Op times are the logged TIME, at
// least 1 ns so that ops keep distinct start times. Zero-byte storages are not blocks.
// Throws trace::TraceError naming the file and line of the first problem.
trace::Trace load_dtr_log(const std::string& path);
// The same from a stream; `name` stands for the file in messages and gives the model name.
trace::Trace parse_dtr_log(std::istream& in, const std::string& name);

}  // namespace delta::planner
