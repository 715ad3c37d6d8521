// DELTA_BUDGET as auto mode reads it: bytes ("40GiB", "512MiB", "6000000000") or a fraction
// of the device's memory ("0.5", in (0, 1]).
#pragma once

#include <cstdint>
#include <string>

namespace delta::autopilot {

// Throws std::invalid_argument naming `name` and the text: not a number or size, zero, a
// fraction above 1, or more bytes than the device has.
std::uint64_t parse_budget_setting(const std::string& name, const std::string& text, std::uint64_t device_bytes);

// A whole number of bytes, at least 1 (DELTA_HOST_BUDGET, run mode's DELTA_BUDGET): digits only,
// so that "-1" is refused rather than wrapped to 2^64 - 1. Throws std::invalid_argument naming
// `name` and the text.
std::uint64_t parse_byte_count_setting(const std::string& name, const std::string& text);

// Seconds, from 0 to a million (DELTA_PLAN_SECONDS): a plain decimal number ("2", "0.5").
// Throws std::invalid_argument naming `name` and the text.
double parse_seconds_setting(const std::string& name, const std::string& text);

}  // namespace delta::autopilot
