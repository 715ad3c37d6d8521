// What every regeneration of a gap must replay (relaxation.hpp).
#include "bound/relaxation.hpp"

#include <algorithm>

namespace delta::planner::relaxation {

std::vector<std::uint32_t> forced_chain(const TraceIndex& index, std::uint32_t block, std::uint32_t after, std::uint32_t before,
                                        std::vector<FreedInput>* freed) {
  const BlockInfo& info = index.block(block);
  if (info.from_start || info.category == trace::Category::parameter || info.category == trace::Category::input) return {};
  std::vector<std::uint32_t> chain = index.overwrite_chain(block, before);
  if (chain.empty()) return {};
  constexpr std::size_t kMaxOps = 256;  // a longer closure is cut short: fewer forced ops, still a bound
  std::vector<std::uint32_t> rebuilt{block}, pending(chain);
  while (!pending.empty() && chain.size() < kMaxOps) {
    const std::uint32_t op = pending.back();
    pending.pop_back();
    for (const OpUse& u : index.uses(op)) {
      if (!u.read || std::find(rebuilt.begin(), rebuilt.end(), u.block) != rebuilt.end()) continue;
      if (index.version_at(u.block, after + 1) == u.version) {
        if (freed && index.block(u.block).last <= after) {
          rebuilt.push_back(u.block);
          std::vector<std::uint32_t> made = index.overwrite_chain(u.block, op);
          if (!made.empty()) freed->push_back({u.block, std::move(made), {}});  // else only retention serves
        }
        continue;
      }
      const std::vector<std::uint32_t> inner = index.overwrite_chain(u.block, op);
      if (inner.empty()) return {};  // its data cannot be made again: no regeneration works
      rebuilt.push_back(u.block);
      for (std::uint32_t p : inner)
        if (std::find(chain.begin(), chain.end(), p) == chain.end()) {
          chain.push_back(p);
          pending.push_back(p);
        }
    }
  }
  // A freed input is revived by replaying its writes, which may read blocks freed before the
  // gap too: those are revived or retained in turn (a few levels: fewer forced replays, still
  // a bound).
  constexpr std::size_t kMaxFreed = 64;
  for (std::size_t k = 0; freed && k < freed->size() && freed->size() < kMaxFreed; ++k) {
    if ((*freed)[k].needed_for.size() >= 4) continue;
    const FreedInput parent = (*freed)[k];
    for (std::uint32_t op : parent.ops)
      for (const OpUse& u : index.uses(op)) {
        if (!u.read || u.block == parent.block || index.block(u.block).last > after) continue;
        if (index.version_at(u.block, after + 1) != u.version) continue;  // overwritten since: not followed
        if (std::find(rebuilt.begin(), rebuilt.end(), u.block) != rebuilt.end() ||
            std::any_of(freed->begin(), freed->end(), [&](const FreedInput& f) { return f.block == u.block; }))
          continue;
        std::vector<std::uint32_t> made = index.overwrite_chain(u.block, op);
        if (made.empty()) continue;
        FreedInput child{u.block, std::move(made), parent.needed_for};
        child.needed_for.push_back(parent.block);
        freed->push_back(std::move(child));
      }
  }
  if (freed)
    for (FreedInput& f : *freed) f.revivable = !revival_reads_gone(index, f.ops, f.block, after + 1);
  std::sort(chain.begin(), chain.end());
  return chain;
}

bool revival_reads_gone(const TraceIndex& index, const std::vector<std::uint32_t>& ops, std::uint32_t freed, std::uint32_t at) {
  for (std::uint32_t op : ops)
    for (const OpUse& u : index.uses(op))
      if (u.read && u.block != freed && index.version_at(u.block, at) != u.version && index.overwrite_chain(u.block, op).empty())
        return true;
  return false;
}

}  // namespace delta::planner::relaxation
