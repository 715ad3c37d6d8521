// The alloc stream: a recorded sequence of allocations and frees that any allocator policy can
// replay. JSON, versioned; the format is specified in docs/replay.md. Importers in
// tools/importers produce it from real traces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace delta::replay {

inline constexpr std::string_view kAllocStreamFormat = "delta-alloc-stream";
inline constexpr int kAllocStreamVersion = 1;
// No device allocation is this large; a bigger size is a corrupt or hostile stream.
inline constexpr std::uint64_t kMaxAllocationBytes = std::uint64_t{1} << 44;  // 16 TiB

// A stream that cannot be read or violates the format. The message names the file, the
// element (e.g. "events[17].size") and the rule that was broken.
class AllocStreamError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct AllocEvent {
  enum class Op : std::uint8_t { alloc, free };
  Op op;
  std::uint64_t id;
  std::uint64_t size;    // requested bytes (alloc); the live block's size (free)
  std::uint64_t stream;  // stream of the allocation; frees inherit it
  double t_us;           // time of the event; non-decreasing
};

struct LiveBlock {
  std::uint64_t id;
  std::uint64_t size;
  std::uint64_t stream;
};

// What the recorded run's own allocator did, when the source knows it.
struct NativeObserved {
  std::uint64_t peak_reserved = 0;
  std::uint64_t peak_allocated = 0;
};

struct AllocStream {
  std::string origin;            // file it was read from
  std::string source_kind;       // source.kind, e.g. "pytorch-snapshot", "dtr-log"
  std::vector<LiveBlock> initial_live;
  std::vector<AllocEvent> events;
  std::optional<NativeObserved> native_observed;
  // Peak of the bytes requested by live blocks, initial ones included: the same figure for
  // every policy, so ratios against it compare policies fairly.
  std::uint64_t peak_live_bytes = 0;
};

// Reads a stream from a file, plain or gzip-compressed (detected from its content).
AllocStream read_alloc_stream(const std::string& path);
// Parses and validates a stream held in memory; `origin` prefixes every error message.
AllocStream parse_alloc_stream(std::string_view text, const std::string& origin);

}  // namespace delta::replay
