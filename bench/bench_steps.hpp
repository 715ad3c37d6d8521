// The steps the run-mode benchmarks drive (bench_executor, bench_cuda_route): kOps ops of
// 4 KiB blocks, and a plan for them with no action, so that what is measured is the cost of
// the entry points themselves.
#pragma once

#include <delta/plan.hpp>
#include <delta/trace.hpp>

#include <cstddef>
#include <cstdint>

namespace delta::bench {

constexpr std::size_t kOps = 1000;
constexpr std::size_t kBytes = 4096;

// A step of kOps ops, each reading a block of 4 KiB allocated just before it and freed after.
inline trace::Trace step_trace() {
  trace::Trace t;
  t.source = "bench";
  t.gpu.profile = "h200";
  for (std::size_t i = 0; i < kOps; ++i) {
    trace::Block b;
    b.id = i + 1;
    b.size = kBytes;
    b.alloc_ns = static_cast<std::int64_t>(10 * i + 1);
    b.free_ns = static_cast<std::int64_t>(10 * i + 5);
    t.blocks.push_back(b);
    trace::Op op;
    op.id = i;
    op.name = "op";
    op.start_ns = static_cast<std::int64_t>(10 * i + 2);
    op.duration_ns = 1;
    op.blocks.push_back({b.id, trace::Access::read});
    t.ops.push_back(op);
  }
  return t;
}

inline plan::Plan empty_plan(const trace::Trace& t) {
  plan::Plan p;
  p.method = "bench";
  p.trace_hash = plan::trace_fingerprint(t);
  p.trace_ops = t.ops.size();
  p.trace_blocks = t.blocks.size();
  p.gpu_profile = "h200";
  p.budget_bytes = std::uint64_t{1} << 30;
  return p;
}

// Launches alone: a step of kOps ops reading one block that lives through it.
inline trace::Trace launch_trace() {
  trace::Trace t = step_trace();
  for (trace::Op& op : t.ops) op.blocks = {{1, trace::Access::read}};
  t.blocks.resize(1);
  t.blocks[0].alloc_ns = trace::kNever;
  t.blocks[0].free_ns = trace::kNever;
  return t;
}

}  // namespace delta::bench
