// Pointer attribution: which live blocks a kernel launch touches, read from its arguments.
//
// A kernel's parameters are laid out in one buffer (the driver's "param buffer"), each at an
// offset and with a size the driver reports (cuFuncGetParamInfo). Pointers appear there as
// 8-byte-aligned 64-bit values: on their own, or inside structs passed by value (arrays of
// pointers, TensorIterator-style offset calculators). Every aligned 8-byte word is compared
// with the live blocks; a hit names the block, interior pointers included. The direction of
// the access cannot be known from a pointer, so every hit is Access::touch.
#pragma once

#include "profiler/block_map.hpp"

#include <delta/trace.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace delta::profiler {

struct ParamSlot {
  std::size_t offset = 0;  // in the param buffer
  std::size_t size = 0;
};
using ParamLayout = std::vector<ParamSlot>;

// Calls visit(offset, word) for every nonzero 8-byte word of a packed param buffer at an
// offset multiple of 8: where a kernel can hold a pointer. Shared by attribution here and by
// the executor's launch route, which patches those words when it replays a launch.
template <typename Visit>
void for_each_param_word(std::span<const std::byte> buffer, Visit&& visit) {
  for (std::size_t at = 0; at + sizeof(std::uint64_t) <= buffer.size(); at += sizeof(std::uint64_t)) {
    std::uint64_t word;
    std::memcpy(&word, buffer.data() + at, sizeof word);
    if (word != 0) visit(at, word);
  }
}

// The same over the runtime/driver form, args[i] -> the value of parameter i laid out by
// `layout`: words where (slot offset + position) is a multiple of 8, as the kernel sees them;
// `offset` is the word's place in the packed buffer.
template <typename Visit>
void for_each_arg_word(const ParamLayout& layout, void* const* args, Visit&& visit) {
  if (args == nullptr) return;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const ParamSlot& slot = layout[i];
    const auto* value = static_cast<const std::byte*>(args[i]);
    if (value == nullptr || slot.size < sizeof(std::uint64_t)) continue;
    for (std::size_t at = (8 - slot.offset % 8) % 8; at + sizeof(std::uint64_t) <= slot.size; at += sizeof(std::uint64_t)) {
      std::uint64_t word;
      std::memcpy(&word, value + at, sizeof word);
      if (word != 0) visit(slot.offset + at, word);
    }
  }
}

// Adds `use` to `uses` unless the block is already listed with that access; a touch adds
// nothing where the block is already read or written (the known direction says more).
void add_use(std::vector<trace::BlockUse>& uses, std::uint64_t block, trace::Access access);

// A packed param buffer (CU_LAUNCH_PARAM_BUFFER_POINTER, or a layout rebuilt from it): every
// 8-byte word at an offset multiple of 8.
void scan_param_buffer(std::span<const std::byte> buffer, const BlockMap& blocks, std::vector<trace::BlockUse>& uses);

// The runtime/driver form: args[i] points to the value of parameter i, laid out by `layout`.
// Words are read where (slot offset + position) is a multiple of 8, as the kernel sees them.
void scan_kernel_args(const ParamLayout& layout, void* const* args, const BlockMap& blocks,
                      std::vector<trace::BlockUse>& uses);

// The live blocks a packed param buffer points into, each once, in the order their first
// pointer appears (the same order scan_param_buffer lists their uses in).
std::vector<LiveBlock> param_blocks(std::span<const std::byte> buffer, const BlockMap& blocks);

// Every block that [address, address + bytes) overlaps, with `access` (copies and memsets).
void attribute_range(std::uint64_t address, std::uint64_t bytes, trace::Access access, const BlockMap& blocks,
                     std::vector<trace::BlockUse>& uses);

}  // namespace delta::profiler
