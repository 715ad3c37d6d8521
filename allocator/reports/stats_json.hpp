#pragma once

#include <delta/allocator.hpp>

#include <nlohmann/json.hpp>

namespace delta {
// Every statistic under its own name, plus the derived fragmentation.
nlohmann::json stats_to_json(const AllocatorStats& stats);
}  // namespace delta
