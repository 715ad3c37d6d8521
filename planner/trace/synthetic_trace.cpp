#include "trace/synthetic_trace.hpp"

#include <string>
#include <utility>

namespace delta::planner {

// A layered forward/backward model with `layers` layers: the shape of a training step.
trace::Trace layered_training_trace(std::size_t layers) {
  trace::Trace t;
  std::uint64_t next_block = 0;
  std::int64_t now = 0;
  auto add_op = [&](const std::string& name, std::int64_t duration, std::vector<trace::BlockUse> uses, trace::Phase phase) {
    trace::Op op;
    op.id = t.ops.size();
    op.name = name;
    op.start_ns = now;
    op.duration_ns = duration;
    op.phase = phase;
    op.blocks = std::move(uses);
    now += duration;
    t.ops.push_back(std::move(op));
  };
  std::vector<std::uint64_t> activations;
  std::uint64_t input = next_block++;
  t.blocks.push_back({input, 1 << 20, 0, 0, trace::kNever, trace::kNever, trace::Category::input, ""});
  std::uint64_t previous = input;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::uint64_t id = next_block++;
    trace::Block b;
    b.id = id;
    b.size = (4 + l % 7) << 20;
    b.alloc_ns = now;
    t.blocks.push_back(b);
    add_op("fwd", 100'000 + 10'000 * (l % 5), {{previous, trace::Access::read}, {id, trace::Access::write}}, trace::Phase::forward);
    activations.push_back(id);
    previous = id;
  }
  for (std::size_t l = layers; l-- > 0;) {
    add_op("bwd", 200'000, {{activations[l], trace::Access::read}}, trace::Phase::backward);
    t.blocks[activations[l] + 0].free_ns = now;
  }
  return t;
}


}  // namespace delta::planner
