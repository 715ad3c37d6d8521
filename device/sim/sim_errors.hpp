// Small helpers the sim device uses to build its error messages, so that every failure names
// the operation and the exact values involved (addresses in hex, as CUDA tools print them).
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace delta::sim {

inline std::string hex(std::uint64_t value) { return fmt::format("{:#x}", value); }

template <typename... Args>
[[noreturn]] void fail(DeviceErrc code, fmt::format_string<Args...> format, Args&&... args) {
  throw DeviceError(code, "sim device: " + fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace delta::sim
