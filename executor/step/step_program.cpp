#include "executor/step/step_program.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace delta::executor {

std::uint32_t StepProgram::block_index(std::uint64_t id) const {
  auto it = std::lower_bound(blocks.begin(), blocks.end(), id, [](const StepBlock& b, std::uint64_t v) { return b.id < v; });
  if (it == blocks.end() || it->id != id) throw std::out_of_range("the step has no block " + std::to_string(id));
  return static_cast<std::uint32_t>(it - blocks.begin());
}

StepProgram step_program(const trace::Trace& trace) {
  StepProgram program;
  const std::size_t n = trace.ops.size();
  std::unordered_map<std::uint64_t, std::uint32_t> index_of;
  index_of.reserve(trace.blocks.size());
  program.blocks.reserve(trace.blocks.size());
  for (const trace::Block& block : trace.blocks) {
    index_of.emplace(block.id, static_cast<std::uint32_t>(program.blocks.size()));
    StepBlock b;
    b.id = block.id;
    b.size = block.size;
    b.persistent = block.alloc_ns == trace::kNever;
    b.to_end = block.free_ns == trace::kNever;
    program.blocks.push_back(b);
  }
  program.ops.resize(n);
  // Per block, the first and last op using it, to widen its live range over every use.
  std::vector<std::int64_t> first_use(program.blocks.size(), -1), last_use(program.blocks.size(), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const trace::Op& op = trace.ops[i];
    StepOp& step = program.ops[i];
    step.name = op.name;
    step.kind = op.kind;
    step.stream = op.stream;
    step.duration_ns = std::max<std::int64_t>(0, op.duration_ns);
    for (const trace::BlockUse& use : op.blocks) {
      auto found = index_of.find(use.block);
      if (found == index_of.end())
        throw trace::TraceError("ops[" + std::to_string(i) + "]: unknown block " + std::to_string(use.block));
      const std::uint32_t b = found->second;
      auto same = std::find_if(step.uses.begin(), step.uses.end(), [&](const StepUse& u) { return u.block == b; });
      if (same == step.uses.end()) same = step.uses.insert(step.uses.end(), StepUse{b});
      same->read |= use.access != trace::Access::write;
      same->write |= use.access != trace::Access::read;
      if (first_use[b] < 0) first_use[b] = static_cast<std::int64_t>(i);
      if (first_use[b] == static_cast<std::int64_t>(i)) program.blocks[b].read_first |= use.access != trace::Access::write;
      last_use[b] = static_cast<std::int64_t>(i);
    }
  }
  if (n == 0) return program;
  // An op's recorded start decides which blocks exist when it runs: allocated at or before it.
  std::vector<std::int64_t> starts(n);
  for (std::size_t i = 0; i < n; ++i) starts[i] = trace.ops[i].start_ns;
  for (std::uint32_t b = 0; b < program.blocks.size(); ++b) {
    StepBlock& block = program.blocks[b];
    const trace::Block& source = trace.blocks[b];
    std::size_t first = block.persistent ? 0 : std::lower_bound(starts.begin(), starts.end(), source.alloc_ns) - starts.begin();
    std::size_t last = n - 1;
    if (!block.to_end) {
      const std::size_t before_free = std::lower_bound(starts.begin(), starts.end(), source.free_ns) - starts.begin();
      last = before_free == 0 ? 0 : before_free - 1;
    }
    if (first_use[b] >= 0) {
      block.used = true;
      first = std::min<std::size_t>(first, static_cast<std::size_t>(first_use[b]));
      last = std::max<std::size_t>(last, static_cast<std::size_t>(last_use[b]));
    }
    if (first >= n) continue;  // allocated after the last op: never live while an op runs
    last = std::max(last, first);
    block.first = static_cast<std::uint32_t>(first);
    block.last = static_cast<std::uint32_t>(last);
    if (block.persistent) {
      program.persistent.push_back(b);
    } else {
      program.ops[first].allocate_before.push_back(b);
      if (block.to_end) program.carried.push_back(b);
    }
    if (!block.to_end) program.ops[last].free_after.push_back(b);
  }
  return program;
}

}  // namespace delta::executor
