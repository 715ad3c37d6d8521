// The constants of format version 1 shared by the decoder, the encoder and validate().
#pragma once

#include <delta/trace.hpp>

#include <array>
#include <cstdint>
#include <string_view>

namespace delta::trace::format {

inline constexpr std::string_view kFormatName = "delta-trace";

// Largest values a version-1 file may hold (sizes and times: trace.hpp).
using trace::kMaxBlockBytes;
using trace::kMaxTimeNs;
inline constexpr std::uint64_t kMaxStream = (std::uint64_t{1} << 53) - 1;  // exact in a double
// The format nests four levels deep (document, ops, op row, block uses); a little room is left
// for metadata written by future writers. Deeper input is refused before parsing, so hostile
// nesting can never exhaust the stack.
inline constexpr int kMaxNesting = 16;
// Decompressed size limit: a gzip bomb stops here instead of exhausting memory.
inline constexpr std::uint64_t kMaxTextBytes = std::uint64_t{4} << 30;

// Enum codes: the enumerators' declaration order in trace.hpp.
inline constexpr int kAccessCount = 3;
inline constexpr int kPhaseCount = 4;
inline constexpr int kOpKindCount = 6;
inline constexpr int kCategoryCount = 7;

inline constexpr std::array<std::string_view, 8> kBlockColumns = {
    "id", "size", "address", "stream", "alloc_ns", "free_ns", "category", "label"};
inline constexpr std::array<std::string_view, 12> kOpColumns = {
    "id", "name", "kind", "stream", "start_ns", "duration_ns", "duration_estimated",
    "iteration", "phase", "flops", "bytes", "blocks"};
inline constexpr std::array<std::string_view, 5> kIterationColumns = {
    "index", "start_ns", "end_ns", "first_op", "end_op"};

}  // namespace delta::trace::format
