#include "replay/byte_size.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace delta::replay {

std::size_t parse_byte_size(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("invalid size '" + std::string(text) + "': " + why +
                                 " (examples: 80GiB, 141GB, 512MiB, 1073741824)");
  };
  std::string_view rest = text;
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) rest.remove_prefix(1);
  double number = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), number);
  if (ec != std::errc() || !std::isfinite(number)) throw bad("no number");
  if (number < 0) throw bad("negative");
  std::string unit(end, rest.data() + rest.size());
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},          {"b", 1},
      {"kb", 1e3},      {"mb", 1e6},      {"gb", 1e9},      {"tb", 1e12},
      {"k", 1024.0},    {"m", 1048576.0}, {"g", 1073741824.0}, {"t", 1099511627776.0},
      {"kib", 1024.0},  {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      double bytes = number * scale;
      // Below 2^63: llround's range, and far past any device or host.
      if (bytes >= 9.2e18) throw bad("too large");
      return static_cast<std::size_t>(std::llround(bytes));
    }
  }
  throw bad("unknown unit '" + unit + "'");
}

std::string format_bytes(std::size_t bytes) {
  static const char* kNames[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = double(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, kNames[unit]);
  return text;
}

}  // namespace delta::replay
