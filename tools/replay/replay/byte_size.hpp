// Human byte sizes: parsing "80GiB" / "141GB" / "1.5 TiB" / "1073741824" and printing them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace delta::replay {

// Units: B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB (powers of 1024), case-insensitive;
// a bare number is bytes. Throws std::invalid_argument quoting the text on anything else.
std::size_t parse_byte_size(std::string_view text);

// "51.04 GiB", "512 B".
std::string format_bytes(std::size_t bytes);

}  // namespace delta::replay
