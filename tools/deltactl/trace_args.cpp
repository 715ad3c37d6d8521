#include "trace_args.hpp"

#include <filesystem>
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
  return trace.gpu.profile.empty() ? "h200" : trace.gpu.profile;
}

void check_budget_ratios(const std::vector<double>& ratios) {
  for (double ratio : ratios)
    if (!(ratio > 0 && ratio <= 1)) throw std::invalid_argument("budget ratios must lie in (0, 1], got " + std::to_string(ratio));
}

}  // namespace deltactl
