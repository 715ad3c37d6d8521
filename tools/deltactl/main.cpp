// deltactl: DELTA's command line.
#include "planning/bound_command.hpp"
#include "planning/compare_command.hpp"
#include "running/execute_command.hpp"
#include "running/launch_command.hpp"
#include "common/exit_status.hpp"
#include "planning/plan_command.hpp"
#include "running/replay_command.hpp"
#include "planning/simulate_command.hpp"
#include "trace_command.hpp"

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"deltactl: tools for DELTA, the memory-saving CUDA caching allocator"};
  app.require_subcommand(1);
  deltactl::add_replay_command(app);
  deltactl::add_plan_command(app);
  deltactl::add_compare_command(app);
  deltactl::add_simulate_command(app);
  deltactl::add_execute_command(app);
  deltactl::add_launch_command(app);
  deltactl::add_bound_command(app);
  deltactl::add_trace_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const deltactl::ExitStatus& e) {
    std::cerr << "deltactl: " << e.what() << '\n';
    return e.code;
  } catch (const std::exception& e) {
    std::cerr << "deltactl: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
