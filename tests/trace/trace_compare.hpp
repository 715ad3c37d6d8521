// Field-by-field equality of traces, for round-trip tests.
#pragma once

#include <delta/trace.hpp>

#include <tuple>

namespace delta::trace::testing {

inline auto fields(const Block& b) {
  return std::tie(b.id, b.size, b.address, b.stream, b.alloc_ns, b.free_ns, b.category, b.label);
}
inline auto fields(const BlockUse& u) { return std::tie(u.block, u.access); }
inline bool same(const Op& a, const Op& b) {
  if (a.blocks.size() != b.blocks.size()) return false;
  for (std::size_t i = 0; i < a.blocks.size(); ++i) {
    if (fields(a.blocks[i]) != fields(b.blocks[i])) return false;
  }
  return std::tie(a.id, a.name, a.kind, a.stream, a.start_ns, a.duration_ns, a.duration_estimated, a.iteration,
                  a.phase, a.flops, a.bytes) == std::tie(b.id, b.name, b.kind, b.stream, b.start_ns, b.duration_ns,
                                                         b.duration_estimated, b.iteration, b.phase, b.flops, b.bytes);
}
inline auto fields(const Iteration& i) { return std::tie(i.index, i.start_ns, i.end_ns, i.first_op, i.end_op); }

inline bool same(const Trace& a, const Trace& b) {
  if (std::tie(a.version, a.source, a.model, a.gpu.name, a.gpu.profile, a.gpu.memory_bytes, a.allocator_settings,
               a.metadata) != std::tie(b.version, b.source, b.model, b.gpu.name, b.gpu.profile, b.gpu.memory_bytes,
                                       b.allocator_settings, b.metadata)) {
    return false;
  }
  if (a.blocks.size() != b.blocks.size() || a.ops.size() != b.ops.size() || a.iterations.size() != b.iterations.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.blocks.size(); ++i) if (fields(a.blocks[i]) != fields(b.blocks[i])) return false;
  for (std::size_t i = 0; i < a.ops.size(); ++i) if (!same(a.ops[i], b.ops[i])) return false;
  for (std::size_t i = 0; i < a.iterations.size(); ++i) if (fields(a.iterations[i]) != fields(b.iterations[i])) return false;
  return true;
}

}  // namespace delta::trace::testing
