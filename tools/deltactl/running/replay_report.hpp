// Printing replay results: a table for people, JSON for scripts.
#pragma once

#include "replay/alloc_stream.hpp"
#include "replay/replayer.hpp"

#include <nlohmann/json.hpp>

#include <ostream>
#include <vector>

namespace deltactl {

void print_replay_table(std::ostream& out, const delta::replay::AllocStream& stream,
                        const std::vector<delta::replay::ReplayResult>& results);
nlohmann::json replay_json(const delta::replay::AllocStream& stream,
                           const std::vector<delta::replay::ReplayResult>& results);

}  // namespace deltactl
