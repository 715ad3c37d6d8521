// The trace hash a plan carries: FNV-1a over everything the plan's decisions depend on, so a
// plan applied to a re-recorded or edited trace is refused instead of silently misapplied.
#include <delta/plan.hpp>

#include <cstdio>

namespace delta::plan {
namespace {

struct Fnv1a {
  std::uint64_t state = 1469598103934665603ull;
  void add(std::uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      state ^= (value >> (8 * i)) & 0xff;
      state *= 1099511628211ull;
    }
  }
};

}  // namespace

std::string trace_fingerprint(const trace::Trace& trace) {
  Fnv1a hash;
  hash.add(trace.blocks.size());
  for (const trace::Block& block : trace.blocks) {
    hash.add(block.id);
    hash.add(block.size);
    hash.add(static_cast<std::uint64_t>(block.alloc_ns));
    hash.add(static_cast<std::uint64_t>(block.free_ns));
  }
  hash.add(trace.ops.size());
  for (const trace::Op& op : trace.ops) {
    hash.add(op.id);
    hash.add(static_cast<std::uint64_t>(op.duration_ns));
    for (const trace::BlockUse& use : op.blocks) hash.add(use.block * 4 + static_cast<std::uint64_t>(use.access));
  }
  char text[24];
  std::snprintf(text, sizeof text, "fnv1a:%016llx", static_cast<unsigned long long>(hash.state));
  return text;
}

}  // namespace delta::plan
