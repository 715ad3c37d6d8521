#include "running/launch_command.hpp"

#include "autopilot/budget_setting.hpp"
#include "common/exit_status.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace deltactl {
namespace {

struct LaunchArgs {
  std::string budget, host_budget, plan_cache, plan_seconds, library;
  std::uint32_t record_iterations = 0;  // 0: DELTA's default
  std::vector<std::string> command;
};

// libdelta.so: --library, else DELTA_LIBRARY, else beside an installed deltactl (../lib), else
// the one this build made.
std::string find_library(const LaunchArgs& args) {
  if (!args.library.empty()) return args.library;
  if (const char* chosen = std::getenv("DELTA_LIBRARY"); chosen && *chosen) return chosen;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path installed = self.parent_path() / ".." / "lib" / "libdelta.so";
    if (std::filesystem::exists(installed)) return installed.lexically_normal().string();
  }
#ifdef DELTACTL_LIBDELTA_PATH
  if (std::filesystem::exists(DELTACTL_LIBDELTA_PATH)) return DELTACTL_LIBDELTA_PATH;
#endif
  throw ExitStatus(1, "deltactl launch: libdelta.so not found (give --library or set DELTA_LIBRARY)");
}

void run_launch(const LaunchArgs& args) {
  if (args.command.empty()) throw std::invalid_argument("deltactl launch: give the command after --");
  // The budget's syntax is checked here, before the job starts; its size against the device
  // when the job's DELTA starts.
  (void)delta::autopilot::parse_budget_setting("--budget", args.budget, std::numeric_limits<std::uint64_t>::max());
  if (!args.plan_seconds.empty()) (void)delta::autopilot::parse_seconds_setting("--plan-seconds", args.plan_seconds);
  const std::string library = std::filesystem::absolute(find_library(args)).string();
  if (!std::filesystem::exists(library)) throw ExitStatus(1, "deltactl launch: no library at " + library);
  std::string preload = library;
  if (const char* existing = std::getenv("LD_PRELOAD"); existing && *existing) preload += std::string(":") + existing;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  ::setenv("DELTA_MODE", "auto", 1);
  ::setenv("DELTA_BUDGET", args.budget.c_str(), 1);
  if (!std::getenv("PYTORCH_CUDA_ALLOC_CONF")) ::setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 1);
  if (!args.host_budget.empty()) ::setenv("DELTA_HOST_BUDGET", args.host_budget.c_str(), 1);
  if (!args.plan_cache.empty()) ::setenv("DELTA_PLAN_CACHE", args.plan_cache.c_str(), 1);
  if (!args.plan_seconds.empty()) ::setenv("DELTA_PLAN_SECONDS", args.plan_seconds.c_str(), 1);
  if (args.record_iterations) ::setenv("DELTA_RECORD_ITERATIONS", std::to_string(args.record_iterations).c_str(), 1);
  std::vector<std::string> words = args.command;
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw ExitStatus(127, "deltactl launch: cannot run '" + args.command[0] + "'");
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* command = app.add_subcommand("launch", "Run a command under auto mode: LD_PRELOAD, DELTA_MODE=auto and the budget set");
  command->add_option("--budget", args->budget, "What DELTA may hold on the device: bytes (40GiB) or a fraction of its memory (0.5)")
      ->required();
  command->add_option("--host-budget", args->host_budget, "Pinned host memory DELTA may take, in bytes (DELTA_HOST_BUDGET)");
  command->add_option("--plan-cache", args->plan_cache, "Where plans are kept between runs (DELTA_PLAN_CACHE; off: nowhere)");
  command->add_option("--plan-seconds", args->plan_seconds,
                      "A limit on each plan's planning time, in seconds (DELTA_PLAN_SECONDS; default: none, the best plan)");
  command->add_option("--record-iterations", args->record_iterations, "Iterations recorded before planning (DELTA_RECORD_ITERATIONS)")
      ->check(CLI::Range(1, 1000));
  command->add_option("--library", args->library, "The libdelta.so to preload (default: DELTA_LIBRARY, the installed one, this build's)");
  command->add_option("command", args->command, "The command and its arguments, after --")->required();
  command->callback([args] { run_launch(*args); });
}

}  // namespace deltactl
