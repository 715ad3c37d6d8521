// gzip in memory (zlib), with the errors of a hostile or damaged file turned into TraceError.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace delta::trace {

bool is_gzip(std::string_view bytes);
// Decompresses every gzip member in `bytes`; refuses output above max_bytes.
std::string gunzip(std::string_view bytes, std::uint64_t max_bytes);
std::string gzip(std::string_view text);

}  // namespace delta::trace
