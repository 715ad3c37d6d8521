#include "common/trace_args.hpp"

#include <delta/device.hpp>
#include "replay/byte_size.hpp"

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <iostream>
#include <stdexcept>

namespace deltactl {

std::string trace_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const std::string ext : {".gz", ".json", ".log"})
    if (name.size() > ext.size() && name.ends_with(ext)) name.resize(name.size() - ext.size());
  return name;
}

std::string gpu_profile_for(const delta::trace::Trace& trace, const std::string& requested) {
  if (!requested.empty()) return requested;
  if (!trace.gpu.profile.empty()) return trace.gpu.profile;
  // Traces recorded before the recorder named profiles carry only the device's name.
  if (std::string by_name = delta::gpu_profile_for_device(trace.gpu.name); !by_name.empty()) return by_name;
  std::cerr << "deltactl: the trace names no GPU profile" << (trace.gpu.name.empty() ? "" : " and no known GPU (" + trace.gpu.name + ")")
            << ": planning for h200 (choose with --gpu)\n";
  return "h200";
}

Budget parse_budget(const std::string& raw, std::uint64_t native_peak) {
  // Spaces around it are a shell's, not a unit: "0.5 " is the fraction.
  const std::size_t from = raw.find_first_not_of(" \t"), to = raw.find_last_not_of(" \t");
  const std::string text = from == std::string::npos ? std::string() : raw.substr(from, to - from + 1);
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("budget '" + text + "' is neither a fraction of the native peak nor a byte count");
  }
  if (!(value > 0) || !std::isfinite(value)) throw std::invalid_argument("budget '" + text + "' must be positive");
  if (used == text.size()) {
    if (value <= 1.0) {
      std::ostringstream label;
      label << std::fixed << std::setprecision(2) << value;
      const auto bytes = static_cast<std::uint64_t>(double(native_peak) * value);
      // A budget of 0 bytes would read as no budget at all (the simulator's and the plan's 0).
      if (bytes == 0 && native_peak > 0)
        throw std::invalid_argument("budget '" + text + "' of the native peak (" + std::to_string(native_peak) +
                                    " bytes) comes to 0 bytes");
      return {bytes, value, label.str()};
    }
    // "1.5" is most likely a mistyped fraction, not one and a half bytes.
    if (value != std::floor(value))
      throw std::invalid_argument("budget '" + text +
                                  "' is neither a fraction of the native peak (at most 1) nor a whole number of bytes");
    // "80" is most likely 80 GiB without its unit: no training step fits in under a MiB.
    if (value < 1024.0 * 1024.0)
      throw std::invalid_argument("budget '" + text + "' would be " + text +
                                  " bytes: give a unit (" + text + "GiB) or a fraction of the native peak, such as 0.8");
  }
  std::uint64_t bytes = 0;
  try {
    bytes = delta::replay::parse_byte_size(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("budget: " + std::string(e.what()));
  }
  if (bytes == 0) throw std::invalid_argument("budget '" + text + "' comes to 0 bytes");
  return {bytes, native_peak ? double(bytes) / double(native_peak) : 0.0, text};
}

void check_budgets(const std::vector<std::string>& budgets) {
  if (budgets.empty()) throw std::invalid_argument("no budgets given");
  // Their form only: each trace's own peak decides later whether a fraction comes to 0 bytes.
  for (const std::string& text : budgets) parse_budget(text, std::uint64_t{1} << 62);
}

}  // namespace deltactl
