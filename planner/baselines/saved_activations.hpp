// What the baselines that act on activations share: the forward activations saved for the
// backward pass, each with its last forward use and its first backward use.
#pragma once

#include "trace/trace_index.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace delta::planner {

// The op at which the backward pass starts: the first op marked backward, else the op where
// live memory peaks (activations accumulate until then).
std::size_t backward_start(const TraceIndex& index);

// A forward activation: produced before the backward pass and used again in it.
struct Saved {
  std::uint32_t block;
  std::uint32_t last_forward_use;
  std::uint32_t first_backward_use;
};

// Every such activation idle between its two passes, in the order of their producers.
std::vector<Saved> saved_for_backward(const TraceIndex& index);

}  // namespace delta::planner
