// Hand-built traces whose step time and peak under a plan can be worked out on paper.
#pragma once

#include <delta/trace.hpp>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace delta::planner::testing {

inline trace::Block block(std::uint64_t id, std::uint64_t size, std::int64_t alloc_ns, std::int64_t free_ns,
                          trace::Category category = trace::Category::activation) {
  trace::Block b;
  b.id = id;
  b.size = size;
  b.alloc_ns = alloc_ns;
  b.free_ns = free_ns;
  b.category = category;
  return b;
}

// An empty trace on the Titan V profile, the GPU every trace here runs on.
inline trace::Trace titanv_trace() {
  trace::Trace t;
  t.source = "test";
  t.gpu.profile = "titanv";
  return t;
}

// The same with block 1 a 1 MB parameter W: an input the first op can read, so that replaying
// it needs nothing rebuilt.
inline trace::Trace titanv_trace_with_weights() {
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, 1'000'000, trace::kNever, trace::kNever, trace::Category::parameter));
  return t;
}

// Appends an op after the previous one (back to back) touching the given blocks.
inline void op(trace::Trace& t, const std::string& name, std::int64_t duration_ns,
               std::initializer_list<std::pair<std::uint64_t, trace::Access>> uses) {
  trace::Op o;
  o.id = t.ops.size();
  o.name = name;
  o.kind = trace::OpKind::op;
  o.start_ns = t.ops.empty() ? 0 : t.ops.back().start_ns + t.ops.back().duration_ns;
  o.duration_ns = duration_ns;
  for (const auto& [id, access] : uses) o.blocks.push_back({id, access});
  t.ops.push_back(o);
}
inline void op(trace::Trace& t, const std::string& name, std::int64_t duration_ns,
               const std::vector<std::pair<std::uint64_t, trace::Access>>& uses) {
  op(t, name, duration_ns, {});
  for (const auto& [id, access] : uses) t.ops.back().blocks.push_back({id, access});
}

constexpr std::int64_t kMs = 1'000'000;
constexpr std::uint64_t kX = 1'200'000'000;  // 100 ms over a 12 GB/s link (Titan V profile)
constexpr std::uint64_t kY = 100'000'000;

// op0 (10 ms) writes X; op1 (150 ms) uses nothing; op2 (100 ms) writes Y, freed after it;
// op3 (150 ms) uses nothing; op4 (10 ms) reads X. Native: 420 ms, peak X + Y at op 2.
// With `x_read_at_op2`, op 2 also reads X.
inline trace::Trace swap_trace(bool x_read_at_op2 = false) {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, 0, trace::kNever));
  t.blocks.push_back(block(2, kY, 160 * kMs, 260 * kMs));
  op(t, "produce_x", 10 * kMs, {{1, Access::write}});
  op(t, "filler_a", 150 * kMs, {});
  if (x_read_at_op2)
    op(t, "produce_y", 100 * kMs, {{2, Access::write}, {1, Access::read}});
  else
    op(t, "produce_y", 100 * kMs, {{2, Access::write}});
  op(t, "filler_b", 150 * kMs, {});
  op(t, "consume_x", 10 * kMs, {{1, Access::read}});
  return t;
}

// An optimizer's state S (kX, live before the step and after it) read and written only by the
// last op, the optimizer step: op0 (10 ms) and op1 (150 ms) use nothing; op2 (100 ms) writes Y
// (kY), freed after it; op3 (150 ms) uses nothing; op4 (10 ms) updates S. Native: 420 ms, peak
// S + Y at op 2, where only S is idle: copied out after op 0 (100 ms) and back after op 2, the
// swap hides entirely.
inline trace::Trace optimizer_state_trace() {
  using trace::Access;
  trace::Trace t = titanv_trace();
  t.blocks.push_back(block(1, kX, trace::kNever, trace::kNever, trace::Category::optimizer_state));
  t.blocks.push_back(block(2, kY, 160 * kMs, 260 * kMs));
  op(t, "forward", 10 * kMs, {});
  op(t, "filler_a", 150 * kMs, {});
  op(t, "produce_y", 100 * kMs, {{2, Access::write}});
  op(t, "filler_b", 150 * kMs, {});
  op(t, "optimizer_step", 10 * kMs, {{1, Access::read}, {1, Access::write}});
  return t;
}

// Like swap_trace, but op 1 updates X in place (relu_ style), so replaying op 0 cannot rebuild it.
inline trace::Trace in_place_trace() {
  using trace::Access;
  trace::Trace t = swap_trace();
  t.ops[1].blocks = {{1, Access::read}, {1, Access::write}};
  return t;
}

// A densenet121-style concatenation: op0 (10 ms) makes feature F (10 MB) from parameter W;
// op1 and op2 (1 ms each) concatenate it into C1 and C2 (100 MB each), and the program frees F
// after op 2; op3 (10 ms) allocates D (200 MB), freed after it; op4 reads C2 and op5 reads C1
// (1 ms each). Native peak W + C1 + C2 + D at op 3. Rebuilding C2 and then C1 needs F each
// time: replayed twice, or revived once and kept.
inline trace::Trace concat_trace() {
  using trace::Access;
  constexpr std::uint64_t kMb = 1'000'000;
  trace::Trace t = titanv_trace_with_weights();
  t.blocks.push_back(block(2, 10 * kMb, 0, 11 * kMs + kMs / 2));                 // F
  t.blocks.push_back(block(3, 100 * kMb, 10 * kMs, 23 * kMs + kMs / 2));         // C1
  t.blocks.push_back(block(4, 100 * kMb, 11 * kMs, 22 * kMs + kMs / 2));         // C2
  t.blocks.push_back(block(5, 200 * kMb, 12 * kMs, 21 * kMs));                   // D
  op(t, "make_f", 10 * kMs, {{1, Access::read}, {2, Access::write}});
  op(t, "cat_1", 1 * kMs, {{2, Access::read}, {3, Access::write}});
  op(t, "cat_2", 1 * kMs, {{2, Access::read}, {4, Access::write}});
  op(t, "make_d", 10 * kMs, {{5, Access::write}});
  op(t, "use_c2", 1 * kMs, {{4, Access::read}});
  op(t, "use_c1", 1 * kMs, {{3, Access::read}});
  return t;
}

}  // namespace delta::planner::testing
