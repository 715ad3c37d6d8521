// The access trace: what DELTA learns from a run and plans from. In memory, blocks (storage
// lifetimes) and ops (kernels, copies, memsets, or framework ops when kernels are unknown)
// with the blocks each reads, writes or touches. On disk it is versioned JSON (optionally
// gzip), documented in docs/trace-format.md with a JSON Schema in docs/trace.schema.json.
// Everything — recorder, importers, viewers, planner — reads and writes it through this header.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace delta::trace {

inline constexpr int kFormatVersion = 1;
inline constexpr std::int64_t kNever = -1;  // a time that did not happen inside the trace
// Largest block and time a trace may hold (validate() refuses more). Far above anything real,
// they keep every sum the readers compute (address + size, start + duration) inside 64 bits.
inline constexpr std::uint64_t kMaxBlockBytes = std::uint64_t{1} << 48;  // 256 TiB
inline constexpr std::int64_t kMaxTimeNs = std::int64_t{1} << 62;        // ~146 years

enum class Access : std::uint8_t { read, write, touch };  // touch: direction unknown
enum class Phase : std::uint8_t { unknown, forward, backward, optimizer };
enum class OpKind : std::uint8_t { kernel, copy_h2d, copy_d2h, copy_d2d, memset, op };
// What a block holds, when the source knows; the planner treats categories differently
// (parameters are never regenerated, inputs cannot be).
enum class Category : std::uint8_t { unknown, parameter, input, activation, gradient, optimizer_state, temporary };

const char* to_string(Access);
const char* to_string(Phase);
const char* to_string(OpKind);
const char* to_string(Category);

struct GpuInfo {
  std::string name;            // as reported ("NVIDIA H200", "Titan V", ...)
  std::string profile;         // a delta::gpu_profile name: h200, a100, v100, titanv
  std::uint64_t memory_bytes = 0;
};

struct Block {
  std::uint64_t id = 0;        // unique in the trace
  std::uint64_t size = 0;      // bytes
  std::uint64_t address = 0;   // device address when known, else 0
  std::uint64_t stream = 0;
  std::int64_t alloc_ns = kNever;  // kNever: live before the trace starts
  std::int64_t free_ns = kNever;   // kNever: still live when the trace ends
  Category category = Category::unknown;
  std::string label;           // e.g. the tensor or parameter name, when known
};

struct BlockUse {
  std::uint64_t block = 0;     // Block::id
  Access access = Access::touch;
};

struct Op {
  std::uint64_t id = 0;        // position-independent id, unique in the trace
  std::string name;
  OpKind kind = OpKind::kernel;
  std::uint64_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  bool duration_estimated = false;  // filled in by the cost model, not measured
  std::uint32_t iteration = 0;
  Phase phase = Phase::unknown;
  std::vector<BlockUse> blocks;
  double flops = 0;            // when known (cost model input), else 0
  std::uint64_t bytes = 0;     // bytes moved by a copy or memset
};

struct Iteration {
  std::uint32_t index = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t first_op = 0;  // index into Trace::ops
  std::uint64_t end_op = 0;    // one past the last op of the iteration
};

struct Trace {
  int version = kFormatVersion;
  std::string source;          // "delta-recorder", "pytorch-et+kineto", "pytorch-snapshot", "dtr-log", "capture"
  std::string model;           // free text: model and batch size, when known
  GpuInfo gpu;
  std::map<std::string, std::string> allocator_settings;
  std::map<std::string, std::string> metadata;  // anything else worth keeping (recorder overhead ...)
  std::vector<Block> blocks;   // sorted by id
  std::vector<Op> ops;         // sorted by start_ns, then id
  std::vector<Iteration> iterations;
};

// Every problem found in a file or a trace, with the place: "ops[12].blocks[3]: unknown block 77".
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks what the format promises: unique ids, known block references, sizes and times in
// range, frees after allocs, no two live blocks overlapping at the same address, ops sorted,
// iterations consistent. Throws TraceError naming the first problem.
void validate(const Trace& trace);

// One iteration of a trace, as a trace of its own (what a plan is made for, and what the
// executor matches step by step): its ops, and the blocks live or used in it, those made
// before it persistent and those freed after it live to its end (a block made after its last
// launch and used by none of its ops belongs to the next step). Throws TraceError naming the
// iterations the trace has when `index` is not one of them.
Trace slice_iteration(const Trace& trace, std::uint32_t index);
// The iteration a plan is made for when none is asked: the last one, when the trace marks more
// than one (the first are warm-up as often as not); none (the whole trace) otherwise.
std::optional<std::uint32_t> default_iteration(const Trace& trace);

// JSON text (or gzip of it when the path ends in .gz) to and from files; atomic writes.
Trace read_trace(const std::string& path);
Trace parse_trace(const std::string& json_text, const std::string& origin = "<memory>");
void write_trace(const Trace& trace, const std::string& path);
std::string to_json_text(const Trace& trace);
// Bytes of a file, gzip-compressed or not (detected by content): what read_trace() parses after
// reading the file. `origin` prefixes every error message.
Trace parse_trace_bytes(std::string_view bytes, const std::string& origin = "<memory>");

}  // namespace delta::trace
