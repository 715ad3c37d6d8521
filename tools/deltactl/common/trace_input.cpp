#include "common/trace_input.hpp"

#include "common/python_tools.hpp"
#include "trace/dtr_loader.hpp"

#include <CLI/CLI.hpp>
#include <zlib.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace deltactl {
namespace {

// The first bytes of the file, gzip undone: zlib's gzread passes plain files through as they are.
std::string head_of(const std::string& path, std::size_t bytes) {
  if (!std::filesystem::is_regular_file(path)) throw std::runtime_error(path + ": no such file");
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw std::runtime_error(path + ": cannot open");
  std::string head(bytes, '\0');
  const int got = gzread(file, head.data(), static_cast<unsigned>(bytes));
  gzclose(file);
  if (got < 0) throw std::runtime_error(path + ": unreadable (a damaged gzip file?)");
  head.resize(static_cast<std::size_t>(got));
  return head;
}

bool has_key(std::string_view head, std::string_view key) {
  return head.find("\"" + std::string(key) + "\"") != std::string_view::npos;
}

std::string accepted() { return std::string("accepted: ") + kTraceKinds; }

// A DTR log, gzipped or not: detection reads through gzip, so loading does too.
delta::trace::Trace load_dtr(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw std::runtime_error(path + ": cannot open");
  std::string text;
  char buffer[1 << 16];
  int got = 0;
  while ((got = gzread(file, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(got));
  int error = Z_OK;
  gzerror(file, &error);  // a stream cut short reads to its end, then says so here
  const bool damaged = got < 0 || (error != Z_OK && error != Z_STREAM_END);
  gzclose(file);
  if (damaged) throw std::runtime_error(path + ": unreadable (a damaged gzip file?)");
  std::istringstream in(text);
  return delta::planner::parse_dtr_log(in, path);
}

}  // namespace

const char* kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::delta_trace: return "DELTA trace";
    case TraceKind::dtr_log: return "DTR op log";
    case TraceKind::execution_trace: return "PyTorch Execution Trace";
    case TraceKind::memory_snapshot: return "PyTorch memory snapshot";
  }
  return "?";
}

TraceKind detect_trace_kind(const std::string& path) {
  const std::string head = head_of(path, 4096);
  // Pickle protocol 2 and later open with the PROTO opcode; a snapshot is the one pickle we read.
  if (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80) return TraceKind::memory_snapshot;
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) throw std::runtime_error(path + ": empty file, not a trace (" + accepted() + ")");
  if (head[first] == '{') {
    const std::string_view first_line = std::string_view(head).substr(first, head.find('\n', first) - first);
    if (has_key(first_line, "INSTRUCTION")) return TraceKind::dtr_log;
    // The Python writer puts "format":"delta-trace" first; the C++ writer sorts its keys, and
    // its first (allocator_settings) is followed by the column names of the blocks.
    if (head.find("\"delta-trace\"") != std::string::npos || has_key(head, "block_columns")) return TraceKind::delta_trace;
    if (has_key(head, "schema") && (has_key(head, "nodes") || head.size() < 4096)) return TraceKind::execution_trace;
    if (has_key(head, "traceEvents") || has_key(head, "schemaVersion"))
      throw std::runtime_error(path + ": a Kineto profile on its own; give its Execution Trace and pass this file with --kineto");
  }
  throw std::runtime_error(path + ": not a trace of any known kind (" + accepted() + ")");
}

delta::trace::Trace load_trace(const std::string& path, const std::string& kineto) {
  const TraceKind kind = detect_trace_kind(path);
  if (!kineto.empty() && kind != TraceKind::execution_trace)
    throw std::runtime_error("--kineto " + kineto + ": goes with an Execution Trace, and " + path + " is a " + kind_name(kind));
  switch (kind) {
    case TraceKind::delta_trace: return delta::trace::read_trace(path);
    case TraceKind::dtr_log: return load_dtr(path);
    case TraceKind::execution_trace:
    case TraceKind::memory_snapshot: break;
  }
  // The importers are Python (they share the cost model and the snapshot reader with the
  // viewers); their output is read back through the same validating reader as any trace.
  TemporaryFile imported("deltactl-import", ".json.gz");
  std::vector<std::string> args{path, "-o", imported.path().string(), "--quiet"};
  if (!kineto.empty()) args.insert(args.end(), {"--kineto", kineto});
  run_python_tool(tool_file("tools/importers/to_trace.py"), args, std::string("importing the ") + kind_name(kind) + " " + path);
  return delta::trace::read_trace(imported.path().string());
}

void add_kineto_option(CLI::App* command, std::string* kineto) {
  command->add_option("--kineto", *kineto, "Kineto profile of the same run, for an Execution Trace's measured durations")
      ->check(CLI::ExistingFile);
}

void check_kineto(const std::vector<std::string>& paths, const std::string& kineto) {
  if (kineto.empty()) return;
  std::size_t execution_traces = 0;
  for (const std::string& path : paths) execution_traces += detect_trace_kind(path) == TraceKind::execution_trace;
  if (execution_traces != 1)
    throw std::runtime_error("--kineto " + kineto + " goes with exactly one Execution Trace, and " +
                             std::to_string(execution_traces) + " were given");
}

void require_ops(const delta::trace::Trace& trace, const std::string& path, const std::string& command) {
  if (!trace.ops.empty()) return;
  throw std::runtime_error(path + ": the trace has no ops (" +
                           (trace.source == "pytorch-snapshot" ? std::string("a memory snapshot records allocations, not kernels")
                                                               : std::string("nothing was recorded")) +
                           "), and " + command +
                           " needs them; `deltactl trace info`, `convert` and `report` take it as it is");
}

}  // namespace deltactl
