// Which iteration of a trace the planning commands work on: a plan is for one step, and a
// trace recorded from a job holds several (a warm-up first, as often as not).
#pragma once

#include <delta/trace.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>

namespace deltactl {

// Adds --iteration K to a command.
void add_iteration_option(CLI::App& command, std::optional<std::uint32_t>& iteration);

// The step to plan: iteration `requested`, or by default the last one of a trace with several
// (trace::default_iteration), said on stderr; the whole trace when it has one. `chosen` gets
// the iteration taken, if any.
delta::trace::Trace step_to_plan(delta::trace::Trace trace, std::optional<std::uint32_t> requested,
                                 std::optional<std::uint32_t>* chosen = nullptr);

}  // namespace deltactl
