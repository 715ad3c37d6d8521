// Helpers shared by the GPU tests: byte patterns and synchronous round trips through the
// device's async copies.
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <vector>

namespace delta::gpu_test {

// A pattern that differs per seed and per offset, so a misplaced or stale page shows.
inline std::vector<std::uint8_t> pattern(std::size_t bytes, std::uint32_t seed) {
  std::vector<std::uint8_t> data(bytes);
  std::uint32_t state = seed * 2654435761u + 1;
  for (auto& byte : data) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<std::uint8_t>(state >> 24);
  }
  return data;
}

inline void upload(Device& device, DevicePtr dst, const std::vector<std::uint8_t>& data,
                   StreamHandle stream) {
  device.copy_h2d_async(dst, data.data(), data.size(), stream);
  device.synchronize_stream(stream);
}

inline std::vector<std::uint8_t> download(Device& device, DevicePtr src, std::size_t bytes,
                                          StreamHandle stream) {
  std::vector<std::uint8_t> data(bytes);
  device.copy_d2h_async(data.data(), src, bytes, stream);
  device.synchronize_stream(stream);
  return data;
}

}  // namespace delta::gpu_test
