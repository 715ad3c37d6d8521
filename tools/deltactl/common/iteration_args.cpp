#include "common/iteration_args.hpp"

#include <iostream>

namespace deltactl {

void add_iteration_option(CLI::App& command, std::optional<std::uint32_t>& iteration) {
  command.add_option("--iteration", iteration,
                     "Iteration of the trace to plan for (`deltactl trace info` lists them; default: the last, "
                     "when the trace has several)");
}

delta::trace::Trace step_to_plan(delta::trace::Trace trace, std::optional<std::uint32_t> requested,
                                 std::optional<std::uint32_t>* chosen) {
  const std::optional<std::uint32_t> iteration = requested ? requested : delta::trace::default_iteration(trace);
  if (chosen) *chosen = iteration;
  if (!iteration) return trace;
  const std::size_t count = trace.iterations.size();
  delta::trace::Trace step = delta::trace::slice_iteration(trace, *iteration);
  if (count > 1)
    std::cerr << "deltactl: iteration " << *iteration << " of the trace's " << count << " (" << step.ops.size()
              << " ops, " << step.blocks.size() << " blocks)" << (requested ? "" : "; choose with --iteration") << "\n";
  return step;
}

}  // namespace deltactl
