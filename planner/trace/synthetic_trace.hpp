// Synthetic traces with the shape of a training step, for measuring the planner at sizes no
// real trace has (bench/bench_planner) and for tests.
#pragma once

#include <delta/trace.hpp>

#include <cstddef>

namespace delta::planner {

// `layers` forward ops each writing a 4-10 MiB activation, then the backward ops reading them
// in reverse order and freeing them: 2 * layers ops.
trace::Trace layered_training_trace(std::size_t layers);

}  // namespace delta::planner
