// What the planner tests share: requests on the Titan V profile (the GPU the DTR logs were
// recorded on) and the shared DTR logs, read from ../shared/traces/dtr.
#pragma once

#include "common/request.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace delta::planner::testing {

// A request for `budget` bytes.
inline PlanRequest titanv_request(const TraceIndex& index, std::uint64_t budget) {
  PlanRequest request;
  request.index = &index;
  request.gpu = gpu_profile("titanv");
  request.budget_bytes = budget;
  request.budget_ratio = double(budget) / double(index.native_peak());
  return request;
}

// A request for `ratio` of the native peak.
inline PlanRequest titanv_request_at(const TraceIndex& index, double ratio) {
  PlanRequest request = titanv_request(index, static_cast<std::uint64_t>(double(index.native_peak()) * ratio));
  request.budget_ratio = ratio;
  return request;
}

// The shared DTR logs, sorted by name; empty when they are absent.
inline std::vector<std::string> dtr_logs() {
  std::vector<std::string> logs;
  const std::filesystem::path dir = std::filesystem::path(DELTA_TRACES_DIR) / "dtr";
  if (std::filesystem::exists(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".log") logs.push_back(entry.path().string());
  std::sort(logs.begin(), logs.end());
  return logs;
}

// The DTR log of `model` (its file name starts with the model and a dash), or "" when absent.
inline std::string dtr_log(const std::string& model) {
  for (const std::string& log : dtr_logs())
    if (std::filesystem::path(log).filename().string().starts_with(model + "-")) return log;
  return {};
}

}  // namespace delta::planner::testing
