#include "profiler/param_scan.hpp"

#include <algorithm>
#include <cstring>

namespace delta::profiler {

void add_use(std::vector<trace::BlockUse>& uses, std::uint64_t block, trace::Access access) {
  for (trace::BlockUse& use : uses) {
    if (use.block != block) continue;
    if (use.access == access) return;
    if (access == trace::Access::touch) return;
    if (use.access == trace::Access::touch) {
      use.access = access;  // a known direction replaces "unknown"
      return;
    }
  }
  uses.push_back({block, access});
}

namespace {

void match_word(std::uint64_t value, const BlockMap& blocks, std::vector<trace::BlockUse>& uses) {
  if (value == 0) return;
  if (auto block = blocks.find(value)) add_use(uses, block->id, trace::Access::touch);
}

}  // namespace

void scan_param_buffer(std::span<const std::byte> buffer, const BlockMap& blocks, std::vector<trace::BlockUse>& uses) {
  for (std::size_t at = 0; at + sizeof(std::uint64_t) <= buffer.size(); at += sizeof(std::uint64_t)) {
    std::uint64_t value;
    std::memcpy(&value, buffer.data() + at, sizeof value);
    match_word(value, blocks, uses);
  }
}

std::vector<LiveBlock> param_blocks(std::span<const std::byte> buffer, const BlockMap& blocks) {
  std::vector<LiveBlock> out;
  for (std::size_t at = 0; at + sizeof(std::uint64_t) <= buffer.size(); at += sizeof(std::uint64_t)) {
    std::uint64_t value;
    std::memcpy(&value, buffer.data() + at, sizeof value);
    if (value == 0) continue;
    auto block = blocks.find(value);
    if (!block) continue;
    if (std::none_of(out.begin(), out.end(), [&](const LiveBlock& b) { return b.id == block->id; })) out.push_back(*block);
  }
  return out;
}

void scan_kernel_args(const ParamLayout& layout, void* const* args, const BlockMap& blocks,
                      std::vector<trace::BlockUse>& uses) {
  if (args == nullptr) return;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const ParamSlot& slot = layout[i];
    const auto* value = static_cast<const std::byte*>(args[i]);
    if (value == nullptr || slot.size < sizeof(std::uint64_t)) continue;
    // First position inside this parameter that is 8-byte aligned in the param buffer.
    std::size_t at = (8 - slot.offset % 8) % 8;
    for (; at + sizeof(std::uint64_t) <= slot.size; at += sizeof(std::uint64_t)) {
      std::uint64_t word;
      std::memcpy(&word, value + at, sizeof word);
      match_word(word, blocks, uses);
    }
  }
}

void attribute_range(std::uint64_t address, std::uint64_t bytes, trace::Access access, const BlockMap& blocks,
                     std::vector<trace::BlockUse>& uses) {
  for (const LiveBlock& block : blocks.overlapping(address, bytes)) add_use(uses, block.id, access);
}

}  // namespace delta::profiler
