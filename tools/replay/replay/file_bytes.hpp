// Reading a whole file that may be gzip-compressed.
#pragma once

#include <string>

namespace delta::replay {

// The file's bytes, decompressed when it is gzip data. Throws std::runtime_error naming the
// path and the cause (missing, unreadable, truncated or corrupt compressed data).
std::string read_file_maybe_gzip(const std::string& path);

}  // namespace delta::replay
