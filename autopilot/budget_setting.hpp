// DELTA_BUDGET as auto mode reads it: bytes ("40GiB", "512MiB", "6000000000") or a fraction
// of the device's memory ("0.5", in (0, 1]).
#pragma once

#include <cstdint>
#include <string>

namespace delta::autopilot {

// Throws std::invalid_argument naming `name` and the text: not a number or size, zero, a
// fraction above 1, or more bytes than the device has.
std::uint64_t parse_budget_setting(const std::string& name, const std::string& text, std::uint64_t device_bytes);

}  // namespace delta::autopilot
