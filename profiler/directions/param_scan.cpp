#include "profiler/directions/param_scan.hpp"

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
  if (auto block = blocks.find(value)) add_use(uses, block->id, trace::Access::touch);
}

}  // namespace

void scan_param_buffer(std::span<const std::byte> buffer, const BlockMap& blocks, std::vector<trace::BlockUse>& uses) {
  for_each_param_word(buffer, [&](std::size_t, std::uint64_t word) { match_word(word, blocks, uses); });
}

std::vector<LiveBlock> param_blocks(std::span<const std::byte> buffer, const BlockMap& blocks) {
  std::vector<LiveBlock> out;
  for_each_param_word(buffer, [&](std::size_t, std::uint64_t word) {
    auto block = blocks.find(word);
    if (block && std::none_of(out.begin(), out.end(), [&](const LiveBlock& b) { return b.id == block->id; }))
      out.push_back(*block);
  });
  return out;
}

void scan_kernel_args(const ParamLayout& layout, void* const* args, const BlockMap& blocks,
                      std::vector<trace::BlockUse>& uses) {
  for_each_arg_word(layout, args, [&](std::size_t, std::uint64_t word) { match_word(word, blocks, uses); });
}

void attribute_range(std::uint64_t address, std::uint64_t bytes, trace::Access access, const BlockMap& blocks,
                     std::vector<trace::BlockUse>& uses) {
  for (const LiveBlock& block : blocks.overlapping(address, bytes)) add_use(uses, block.id, access);
}

}  // namespace delta::profiler
