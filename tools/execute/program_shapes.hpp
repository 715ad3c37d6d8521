// A program whose shape changes between iterations, for auto mode to meet on the sim
// (`deltactl execute --auto --shapes 1x4,0.5x4,1x2`): shape s is the traced step with the
// blocks it makes and frees within itself (activations, temporaries) scaled by s and its
// kernels' times with them, as another batch size or sequence length would give; the state it
// carries (parameters, optimizer state, what crosses the boundary) is the same in every shape.
#pragma once

#include "executor/step/step_program.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace delta::execute {

struct ShapeRun {
  double scale = 1.0;
  std::size_t iterations = 1;
};

// "SCALExCOUNT[,SCALExCOUNT...]", e.g. "1x4,0.5x4"; throws std::invalid_argument naming the
// item that is malformed (a scale outside (0, 4], a count of 0).
std::vector<ShapeRun> parse_shapes(const std::string& text);

// The step at `scale` (sizes rounded up to 512 bytes, at least 512; durations at least 1 ns).
executor::StepProgram scaled_program(const executor::StepProgram& program, double scale);

}  // namespace delta::execute
