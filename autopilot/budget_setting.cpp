#include "autopilot/budget_setting.hpp"

#include <cerrno>

#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace delta::autopilot {

std::uint64_t parse_budget_setting(const std::string& name, const std::string& text, std::uint64_t device_bytes) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument(name + "='" + text + "' " + why +
                                 ": give bytes (40GiB, 512MiB, 6000000000) or a fraction of the device's memory (0.5)");
  };
  if (text.empty()) throw bad("is empty");
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value)) throw bad("is not a number");
  const std::string unit = end;
  static const struct {
    const char* name;
    double bytes;
  } units[] = {{"B", 1.0},          {"KiB", 1024.0},     {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
               {"KB", 1e3},         {"MB", 1e6},         {"GB", 1e9},        {"TB", 1e12}};
  double bytes = 0;
  if (unit.empty()) {
    if (value <= 0) throw bad("is not positive");
    // A fraction: "0.5", or "1e-3" written without a point; "1" alone is a byte count.
    if (value < 1.0 || (value == 1.0 && text.find('.') != std::string::npos)) {
      bytes = value * double(device_bytes);
    } else if (value == std::floor(value) && text.find('.') == std::string::npos) {
      if (value < 1048576.0) throw bad("is under a MiB (a missing unit?)");
      bytes = value;
    } else {
      throw bad("is a fraction above 1");
    }
  } else {
    bool known = false;
    for (const auto& u : units)
      if (unit == u.name) {
        bytes = value * u.bytes;
        known = true;
      }
    if (!known) throw bad("has an unknown unit '" + unit + "'");
    if (value <= 0) throw bad("is not positive");
  }
  if (bytes < 1) throw bad("is less than a byte");
  if (bytes > double(device_bytes))
    throw bad("is more than the device's " + std::to_string(device_bytes) + " bytes");
  return static_cast<std::uint64_t>(bytes);
}

std::uint64_t parse_byte_count_setting(const std::string& name, const std::string& text) {
  const auto bad = [&](const std::string& why) { return std::invalid_argument(name + "='" + text + "' " + why); };
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw bad("is not a number of bytes (digits only, such as 8000000000)");
  errno = 0;
  const unsigned long long bytes = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) throw bad("is more bytes than 64 bits hold");
  if (bytes == 0) throw bad("is 0 bytes: unset it for no limit");
  return bytes;
}

double parse_seconds_setting(const std::string& name, const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument(name + "='" + text + "' " + why + ": give seconds from 0 to 1000000 (2, 0.5)");
  };
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos) throw bad("is not a number of seconds");
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) throw bad("is not a number of seconds");
  if (seconds > 1e6) throw bad("is over a million seconds");
  return seconds;
}

}  // namespace delta::autopilot
