#include "trace_args.hpp"

#include <delta/device.hpp>

#include <filesystem>
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

void check_budget_ratios(const std::vector<double>& ratios) {
  for (double ratio : ratios)
    if (!(ratio > 0 && ratio <= 1)) throw std::invalid_argument("budget ratios must lie in (0, 1], got " + std::to_string(ratio));
}

}  // namespace deltactl
