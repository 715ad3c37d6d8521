#include "autopilot/steps/step_key.hpp"

#include <cstdio>

namespace delta::autopilot {

void StepKey::add(char tag, std::uint64_t value) {
  state_ ^= static_cast<std::uint8_t>(tag);
  state_ *= 1099511628211ull;
  for (int i = 0; i < 8; ++i) {
    state_ ^= (value >> (8 * i)) & 0xff;
    state_ *= 1099511628211ull;
  }
}

static std::uint64_t s_hash(std::string_view text) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : text) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

void StepKey::launch(std::string_view name, std::size_t ranges) {
  add('k', s_hash(name));
  add('r', ranges);
}

void StepKey::text(std::string_view text) { add('t', s_hash(text)); }

std::string StepKey::hex() const {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(state_));
  return text;
}

}  // namespace delta::autopilot
