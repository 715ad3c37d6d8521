// One door for every trace: each command that takes a trace reads any kind the importers know,
// recognised by its content (never its file name): a DELTA trace, a DTR op log, a PyTorch
// Execution Trace (with its Kineto profile when given) or a PyTorch memory snapshot pickle.
#pragma once

#include <delta/trace.hpp>

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace deltactl {

enum class TraceKind { delta_trace, dtr_log, execution_trace, memory_snapshot };

const char* kind_name(TraceKind kind);

// What the file holds, from its first bytes (gzip undone). Throws std::runtime_error naming the
// file and the kinds accepted when it is none of them (a Kineto profile alone is named as such).
TraceKind detect_trace_kind(const std::string& path);

// The file as a DELTA trace. Execution Traces and snapshots go through the Python importers
// (tools/importers/to_trace.py); their warnings (a CPU capture planned as on a GPU) reach stderr.
// `kineto` is the Kineto profile joined to an Execution Trace; empty for none.
delta::trace::Trace load_trace(const std::string& path, const std::string& kineto = "");

// Adds `--kineto FILE` to a command that takes traces.
void add_kineto_option(CLI::App* command, std::string* kineto);

// Refuses a --kineto that no trace of `paths` could use: it goes with exactly one Execution Trace.
void check_kineto(const std::vector<std::string>& paths, const std::string& kineto);

// Refuses a trace without ops for a command that needs them (a memory snapshot records
// allocations only), naming the command.
void require_ops(const delta::trace::Trace& trace, const std::string& path, const std::string& command);

// What the commands' help says a trace argument may be.
inline constexpr const char* kTraceKinds =
    "a DELTA trace (.json[.gz]), a DTR op log, a PyTorch Execution Trace (with --kineto for its profile) or a "
    "PyTorch memory snapshot pickle; recognised by content";

}  // namespace deltactl
