#include "trace_command.hpp"

#include "common/python_tools.hpp"

#include "common/trace_input.hpp"

#include <delta/device.hpp>
#include <delta/trace.hpp>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>


namespace deltactl {
namespace {

using namespace delta::trace;

constexpr std::uintmax_t kBigFileBytes = 16u << 20;  // announce stages above this

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

std::string human_ns(double ns) {
  char text[32];
  if (ns >= 1e9) std::snprintf(text, sizeof text, "%.3f s", ns / 1e9);
  else if (ns >= 1e6) std::snprintf(text, sizeof text, "%.3f ms", ns / 1e6);
  else if (ns >= 1e3) std::snprintf(text, sizeof text, "%.3f us", ns / 1e3);
  else std::snprintf(text, sizeof text, "%.0f ns", ns);
  return text;
}

struct PeakLive {
  std::uint64_t bytes = 0;
  std::int64_t at_ns = 0;
};

// Blocks live before the trace count from its start; frees at a time come before allocations.
PeakLive peak_live(const Trace& trace) {
  std::vector<std::pair<std::int64_t, std::int64_t>> changes;  // (time, +/- bytes)
  // Signed: a block allocated and freed at the same instant is seen freed first.
  std::int64_t live = 0;
  for (const Block& block : trace.blocks) {
    if (block.alloc_ns == kNever) live += static_cast<std::int64_t>(block.size);
    else changes.emplace_back(block.alloc_ns, static_cast<std::int64_t>(block.size));
    if (block.free_ns != kNever) changes.emplace_back(block.free_ns, -static_cast<std::int64_t>(block.size));
  }
  std::sort(changes.begin(), changes.end());
  PeakLive peak{static_cast<std::uint64_t>(live), 0};
  for (const auto& [time, change] : changes) {
    live += change;
    if (live > 0 && static_cast<std::uint64_t>(live) > peak.bytes) peak = {static_cast<std::uint64_t>(live), time};
  }
  return peak;
}

class StageReporter {
 public:
  explicit StageReporter(const std::string& path) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    enabled_ = !error && size >= kBigFileBytes;
  }
  void stage(const std::string& text) {
    if (!enabled_) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "[%6.1f s] %s\n", seconds, text.c_str());
  }

 private:
  bool enabled_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

void print_info(const std::string& path, const std::string& kineto) {
  StageReporter progress(path);
  progress.stage("reading " + path);
  const Trace trace = load_trace(path, kineto);
  progress.stage("read");
  std::uint64_t uses = 0, estimated = 0, reads = 0, writes = 0, touches = 0;
  double total_ns = 0, estimated_ns = 0;
  for (const Op& op : trace.ops) {
    uses += op.blocks.size();
    for (const auto& use : op.blocks)
      (use.access == delta::trace::Access::read ? reads : use.access == delta::trace::Access::write ? writes : touches)++;
    total_ns += static_cast<double>(op.duration_ns);
    if (op.duration_estimated) {
      ++estimated;
      estimated_ns += static_cast<double>(op.duration_ns);
    }
  }
  std::uint64_t block_bytes = 0, before_trace = 0;
  for (const Block& block : trace.blocks) {
    block_bytes += block.size;
    if (block.alloc_ns == kNever) ++before_trace;
  }
  const PeakLive peak = peak_live(trace);
  std::printf("file:        %s\n", path.c_str());
  std::printf("source:      %s%s%s\n", trace.source.c_str(), trace.model.empty() ? "" : ", model ",
              trace.model.c_str());
  // What the planning commands use when the trace names no profile: the device's.
  const std::string by_name = delta::gpu_profile_for_device(trace.gpu.name);
  const std::string profile = !trace.gpu.profile.empty() ? trace.gpu.profile
                              : !by_name.empty()         ? "none; " + by_name + " by its name"
                                                         : "none";
  std::printf("gpu:         %s (profile %s, %s)\n", trace.gpu.name.empty() ? "unknown" : trace.gpu.name.c_str(),
              profile.c_str(),
              trace.gpu.memory_bytes ? human_bytes(static_cast<double>(trace.gpu.memory_bytes)).c_str() : "memory unknown");
  std::printf("blocks:      %zu (%s in all; %llu live before the trace)\n", trace.blocks.size(),
              human_bytes(static_cast<double>(block_bytes)).c_str(), static_cast<unsigned long long>(before_trace));
  std::printf("ops:         %zu (%llu block uses)\n", trace.ops.size(), static_cast<unsigned long long>(uses));
  if (trace.ops.empty())  // by design for a snapshot; the planning commands refuse it, so say why here
    std::printf("             (none: %s; plan, compare, bound, simulate and execute need ops)\n",
                trace.source == "pytorch-snapshot" ? "a memory snapshot records allocations, not kernels" : "none recorded");
  std::printf("uses:        %llu read, %llu write, %llu touch (direction unknown)\n",
              static_cast<unsigned long long>(reads), static_cast<unsigned long long>(writes),
              static_cast<unsigned long long>(touches));
  std::printf("iterations:  %zu\n", trace.iterations.size());
  std::printf("peak live:   %s (%llu B) at %s\n", human_bytes(static_cast<double>(peak.bytes)).c_str(),
              static_cast<unsigned long long>(peak.bytes), human_ns(static_cast<double>(peak.at_ns)).c_str());
  std::printf("op time:     %s\n", human_ns(total_ns).c_str());
  std::printf("estimated:   %llu of %zu ops, %.1f%% of op time\n", static_cast<unsigned long long>(estimated),
              trace.ops.size(), total_ns > 0 ? 100.0 * estimated_ns / total_ns : 0.0);
}

void convert(const std::string& input, const std::string& output, const std::string& kineto) {
  if (std::filesystem::exists(input) && std::filesystem::exists(output) &&
      std::filesystem::equivalent(input, output)) {
    throw TraceError(output + ": is the input file; write to another path");
  }
  StageReporter progress(input);
  progress.stage("reading and validating " + input);
  const Trace trace = load_trace(input, kineto);
  progress.stage("writing " + output);
  write_trace(trace, output);
  progress.stage("done");
  std::error_code error;
  const auto bytes = std::filesystem::file_size(output, error);
  std::printf("%s -> %s: %zu ops, %zu blocks, %s\n", input.c_str(), output.c_str(), trace.ops.size(),
              trace.blocks.size(), error ? "?" : human_bytes(static_cast<double>(bytes)).c_str());
}

}  // namespace

// The report is drawn by the Python viewers (matplotlib, HTML): run them with the project's
// venv when there is one, so `deltactl trace report` works wherever deltactl was built.
struct ReportRequest {
  std::string trace, kineto, html, png, perfetto, memory_viz;
};

void run_report(const ReportRequest& r) {
  if (r.html.empty() && r.png.empty() && r.perfetto.empty() && r.memory_viz.empty())
    throw std::runtime_error("trace report: name at least one output (--html, --png, --perfetto, --memory-viz)");
  std::vector<std::string> args{r.trace};
  auto add = [&](const char* flag, const std::string& value) {
    if (!value.empty()) {
      args.push_back(flag);
      args.push_back(value);
    }
  };
  add("--html", r.html);
  add("--png", r.png);
  add("--perfetto", r.perfetto);
  add("--memory-viz", r.memory_viz);
  // The viewers read DELTA traces: any other kind is imported first, as every command does.
  std::optional<TraceKind> kind;
  try {
    kind = detect_trace_kind(r.trace);
  } catch (const std::runtime_error&) {
    // An allocator dump (for --memory-viz alone) is no trace: it goes to the viewers as it is.
    if (!r.html.empty() || !r.png.empty() || !r.perfetto.empty()) throw;
  }
  std::unique_ptr<TemporaryFile> imported;
  if (kind && (*kind != TraceKind::delta_trace || !r.kineto.empty())) {
    imported = std::make_unique<TemporaryFile>("deltactl-report", ".json.gz");
    write_trace(load_trace(r.trace, r.kineto), imported->path().string());
    args[0] = imported->path().string();
  }
  run_python_tool(tool_file("tools/viewers/report.py"), args, "trace report");
}

void add_trace_command(CLI::App& app) {
  CLI::App* trace = app.add_subcommand("trace", "Inspect and convert DELTA access traces");
  trace->require_subcommand(1);

  auto info_path = std::make_shared<std::string>();
  auto info_kineto = std::make_shared<std::string>();
  CLI::App* info = trace->add_subcommand("info", "Summary of a trace: source, GPU, blocks, ops, peak live bytes");
  info->add_option("file", *info_path, std::string("trace file: ") + kTraceKinds)->required();
  add_kineto_option(info, info_kineto.get());
  info->callback([info_path, info_kineto] { print_info(*info_path, *info_kineto); });

  auto paths = std::make_shared<std::pair<std::string, std::string>>();
  auto conv_kineto = std::make_shared<std::string>();
  CLI::App* conv = trace->add_subcommand("convert", "Import or re-validate a trace and write it as a DELTA trace (.json or .json.gz)");
  conv->add_option("input", paths->first, std::string("trace to read: ") + kTraceKinds)->required();
  conv->add_option("output", paths->second, "trace to write (gzip when it ends in .gz)")->required();
  add_kineto_option(conv, conv_kineto.get());
  conv->callback([paths, conv_kineto] { convert(paths->first, paths->second, *conv_kineto); });

  auto report = std::make_shared<ReportRequest>();
  CLI::App* rep = trace->add_subcommand("report", "HTML/PNG report, Perfetto timeline or memory_viz snapshot of a trace");
  rep->add_option("file", report->trace, std::string("trace file: ") + kTraceKinds + " (or, with --memory-viz only, an allocator dump)")->required();
  rep->add_option("--html", report->html, "self-contained HTML report");
  rep->add_option("--png", report->png, "PNG of live memory by category");
  rep->add_option("--perfetto", report->perfetto, "Chrome/Perfetto trace JSON");
  rep->add_option("--memory-viz", report->memory_viz, "pickled snapshot for PyTorch's memory_viz");
  add_kineto_option(rep, &report->kineto);
  rep->callback([report] { run_report(*report); });
}

}  // namespace deltactl
