// Opaque launches (SimLaunch::params): the parameter bytes a GPU profiler would see, and the
// repointing a memory manager does when it replays a kernel on other memory.
#include <delta/sim_device.hpp>

#include <cstring>

namespace delta {
namespace {

void put_word(std::vector<std::uint8_t>& out, std::uint64_t word) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(word >> (8 * i)));
}

}  // namespace

std::vector<std::uint8_t> sim_pack_params(std::span<const DevicePtr> pointers, std::uint64_t scalar) {
  std::vector<std::uint8_t> out;
  out.reserve(8 * (pointers.size() + 1));
  for (const DevicePtr ptr : pointers) put_word(out, ptr);
  put_word(out, scalar);
  return out;
}

SimLaunch sim_repoint(const SimLaunch& launch, std::span<const std::pair<DevicePtr, DevicePtr>> moves) {
  SimLaunch out = launch;
  auto moved = [&](DevicePtr ptr) {
    for (const auto& [from, to] : moves)
      if (ptr == from) return to;
    return ptr;
  };
  for (SimRange& range : out.reads) range.ptr = moved(range.ptr);
  for (SimRange& range : out.writes) range.ptr = moved(range.ptr);
  for (std::size_t at = 0; at + 8 <= out.params.size(); at += 8) {
    std::uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word |= std::uint64_t{out.params[at + i]} << (8 * i);
    const std::uint64_t now = moved(word);
    for (int i = 0; i < 8; ++i) out.params[at + i] = static_cast<std::uint8_t>(now >> (8 * i));
  }
  return out;
}

}  // namespace delta
