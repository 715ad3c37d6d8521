// Small text helpers for messages and dumps, and the atomic file write every dump uses.
#pragma once

#include <cstdint>
#include <string>

namespace delta {

std::string format_bytes(std::size_t bytes);  // "1.50 GiB (1610612736 bytes)"
std::string format_hex(std::uintptr_t value);  // "0x7f00..."
// Writes to a temporary file beside `path`, flushes it to disk and renames it over `path`,
// so readers see the old file or the new one, never half of one. Throws std::runtime_error.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace delta
