// Choosing and building a device: from code (make_sim_device) or from the DELTA_DEVICE and
// DELTA_SIM_* environment variables (make_device_from_env).
#include "device/sim/sim_device_impl.hpp"
#include "logging/log.hpp"

#include <delta/device.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

namespace delta {

namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// Bytes per unit. Bare K/M/G/T and the IEC spellings are powers of 1024, as memory sizes
// usually are; KB/MB/GB/TB are the SI powers of 1000, as disk and GPU vendors write them.
std::optional<double> unit_bytes(std::string_view suffix) {
  const std::string unit = lowercase(suffix);
  constexpr double kKi = 1024.0;
  if (unit.empty() || unit == "b") return 1.0;
  if (unit == "k" || unit == "kib") return kKi;
  if (unit == "m" || unit == "mib") return kKi * kKi;
  if (unit == "g" || unit == "gib") return kKi * kKi * kKi;
  if (unit == "t" || unit == "tib") return kKi * kKi * kKi * kKi;
  if (unit == "kb") return 1e3;
  if (unit == "mb") return 1e6;
  if (unit == "gb") return 1e9;
  if (unit == "tb") return 1e12;
  return std::nullopt;
}

[[noreturn]] void bad_capacity(std::string_view text, std::string_view why) {
  throw std::invalid_argument("DELTA_SIM_CAPACITY='" + std::string(text) + "' is not a valid size: " +
                              std::string(why) +
                              " (expected bytes with an optional unit, e.g. 17179869184, 16GiB, 16G, 512MiB, 80GB)");
}

bool parse_backing(std::string_view text) {
  const std::string value = lowercase(trim(text));
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  throw std::invalid_argument("DELTA_SIM_BACKING='" + std::string(text) + "' must be 1 or 0 (or true/false, yes/no, on/off)");
}

SimContent parse_content(std::string_view text) {
  const std::string value = lowercase(trim(text));
  if (value == "bytes") return SimContent::bytes;
  if (value == "digest") return SimContent::digest;
  if (value == "none") return SimContent::none;
  throw std::invalid_argument("DELTA_SIM_CONTENT='" + std::string(text) + "' must be one of: bytes, digest, none");
}

}  // namespace

std::size_t sim::parse_capacity(std::string_view text) {
  const std::string_view value = trim(text);
  std::size_t digits = 0;
  while (digits < value.size() && (std::isdigit(static_cast<unsigned char>(value[digits])) || value[digits] == '.')) {
    digits++;
  }
  if (digits == 0) bad_capacity(text, "it does not start with a number");
  double number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + digits, number);
  if (error != std::errc() || end != value.data() + digits) bad_capacity(text, "the number is malformed");
  const std::optional<double> unit = unit_bytes(trim(value.substr(digits)));
  if (!unit) bad_capacity(text, "unknown unit '" + std::string(trim(value.substr(digits))) + "'");
  const double bytes = std::round(number * *unit);
  if (!(bytes < static_cast<double>(std::numeric_limits<std::size_t>::max()))) bad_capacity(text, "too large");
  return static_cast<std::size_t>(bytes);
}

DeviceKind parse_device_kind(std::string_view text) {
  const std::string value = lowercase(trim(text));
  if (value == "auto") return DeviceKind::automatic;
  if (value == "cuda") return DeviceKind::cuda;
  if (value == "sim") return DeviceKind::sim;
  throw std::invalid_argument("DELTA_DEVICE='" + std::string(text) + "' must be one of: auto, cuda, sim");
}

std::shared_ptr<Device> make_sim_device(const SimOptions& options) {
  return sim::create_sim_device(options, 0);
}

namespace {

SimOptions sim_options_from_env() {
  SimOptions options;
  if (auto profile = env("DELTA_SIM_PROFILE"); profile && !trim(*profile).empty()) {
    try {
      options.profile = gpu_profile(trim(*profile)).name;
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(std::string("DELTA_SIM_PROFILE: ") + error.what());
    }
  }
  if (auto capacity = env("DELTA_SIM_CAPACITY"); capacity && !trim(*capacity).empty()) {
    options.capacity_bytes = sim::parse_capacity(*capacity);
  }
  std::optional<std::string> content = env("DELTA_SIM_CONTENT");
  if (content && trim(*content).empty()) content.reset();
  if (content) options.content = parse_content(*content);
  if (auto backing = env("DELTA_SIM_BACKING"); backing && !trim(*backing).empty()) {
    options.back_memory = parse_backing(*backing);
    // DELTA_SIM_BACKING=0 is the older way to say DELTA_SIM_CONTENT=none: refuse a setting that
    // says both "no bytes" and "bytes" rather than guess which one was meant.
    if (!options.back_memory && content && options.content != SimContent::none) {
      throw std::invalid_argument("DELTA_SIM_BACKING='" + *backing + "' (no content) contradicts DELTA_SIM_CONTENT='" +
                                  *content + "'; set only DELTA_SIM_CONTENT");
    }
  }
  return options;
}

}  // namespace

std::shared_ptr<Device> make_device_from_env(int ordinal) {
  const std::optional<std::string> setting = env("DELTA_DEVICE");
  const DeviceKind kind =
      setting && !trim(*setting).empty() ? parse_device_kind(*setting) : DeviceKind::automatic;
  // Read the sim settings up front even when CUDA is chosen, so a typo is reported at once
  // rather than on the day the job first lands on a machine without a GPU.
  const SimOptions options = sim_options_from_env();
  if (kind == DeviceKind::cuda) return make_cuda_device(ordinal);
  if (kind == DeviceKind::automatic) {
    try {
      return make_cuda_device(ordinal);
    } catch (const DeviceError& error) {
      if (error.code() != DeviceErrc::no_driver && error.code() != DeviceErrc::no_device) throw;
      static std::once_flag logged;
      std::call_once(logged, [&] {
        log::info("delta: no usable CUDA device ({}); using the simulated '{}' device", error.what(),
                  options.profile);
      });
    }
  }
  return sim::create_sim_device(options, ordinal);
}

}  // namespace delta
