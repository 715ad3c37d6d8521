#include "profiler/directions/direction_score.hpp"

#include <map>
#include <stdexcept>

namespace delta::profiler {
namespace {

struct Rw {
  bool read = false, write = false;
};

std::map<std::uint64_t, Rw> directions(const trace::Op& op) {
  std::map<std::uint64_t, Rw> out;
  for (const trace::BlockUse& use : op.blocks) {
    Rw& rw = out[use.block];
    rw.read |= use.access != trace::Access::write;  // a touch is both, as the planner reads it
    rw.write |= use.access != trace::Access::read;
  }
  return out;
}

bool touched(const trace::Op& op, std::uint64_t block) {
  for (const trace::BlockUse& use : op.blocks)
    if (use.block == block && use.access == trace::Access::touch) return true;
  return false;
}

}  // namespace

DirectionScore score_directions(const trace::Trace& learned, const trace::Trace& truth) {
  if (learned.ops.size() != truth.ops.size() || learned.blocks.size() != truth.blocks.size())
    throw std::invalid_argument("direction score: the traces are not the same recording (ops or blocks differ)");
  DirectionScore s;
  for (std::size_t i = 0; i < truth.ops.size(); ++i) {
    const trace::Op& t = truth.ops[i];
    const trace::Op& l = learned.ops[i];
    if (t.name != l.name || t.kind != l.kind)
      throw std::invalid_argument("direction score: op " + std::to_string(i) + " differs between the traces");
    if (t.kind != trace::OpKind::kernel) continue;
    const auto want = directions(t), got = directions(l);
    for (const auto& [block, rw] : want) {
      ++s.uses;
      const auto found = got.find(block);
      if (found == got.end()) throw std::invalid_argument("direction score: op " + std::to_string(i) + " lost a block");
      const Rw g = found->second;
      if (touched(l, block)) {
        ++s.touches;
      } else if (g.read == rw.read && g.write == rw.write) {
        ++s.exact;
      } else if (rw.write && !g.write) {
        ++s.writes_as_reads;
      } else if (rw.read && !g.read) {
        ++s.reads_lost;
      } else {
        ++s.widened;
      }
    }
  }
  return s;
}

}  // namespace delta::profiler
