// One training step as the program runs it, derived from a trace: which blocks exist before
// the first op, which are allocated just before each op and freed just after it, and what each
// op reads and writes. The executor matches the live program against it by structure (sizes,
// kernel names, order), never by time; `deltactl execute` runs it as a program on the sim.
//
// The positions follow the planner's reading of a trace (planner/trace/trace_index.cpp): a
// block is live from the op at whose start it exists to the last op starting before its free,
// widened to cover every use. Plans name ops by these positions, so both must agree; the
// executor's tests check it on every shared trace.
#pragma once

#include <delta/trace.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace delta::executor {

struct StepUse {
  std::uint32_t block = 0;  // index into StepProgram::blocks
  bool read = false;
  bool write = false;       // a touch (direction unknown) counts as both
};

struct StepBlock {
  std::uint64_t id = 0;     // trace::Block::id
  std::uint64_t size = 0;
  bool persistent = false;  // live before the step starts (parameters, optimizer state, inputs)
  bool to_end = false;      // still live when the step ends
  bool used = false;        // some op of the step uses it
  bool read_first = false;  // its first use reads it (or touches it): its bytes matter before any write
  std::uint32_t first = 0;  // first op during which it is live
  std::uint32_t last = 0;   // last op during which it is live
};

struct StepOp {
  std::string name;
  trace::OpKind kind = trace::OpKind::kernel;
  std::uint64_t stream = 0;  // the trace's stream id
  std::int64_t duration_ns = 0;
  std::vector<StepUse> uses;
  std::vector<std::uint32_t> allocate_before;  // blocks allocated just before the op (by index, in id order)
  std::vector<std::uint32_t> free_after;       // blocks freed just after it
};

struct StepProgram {
  std::vector<StepBlock> blocks;  // in trace order
  std::vector<StepOp> ops;
  // Blocks that exist before op 0, in id order: the program's state (and a step's inputs).
  std::vector<std::uint32_t> persistent;
  // Blocks allocated during the step and live at its end (freed at the start of the next one
  // in a repeated program), in id order.
  std::vector<std::uint32_t> carried;
  std::uint32_t block_index(std::uint64_t id) const;  // throws std::out_of_range naming the id
};

// Throws trace::TraceError naming the place for a use of an unknown block.
StepProgram step_program(const trace::Trace& trace);

}  // namespace delta::executor
