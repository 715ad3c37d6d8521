#include "running/replay_command.hpp"

#include "running/replay_report.hpp"

#include "replay/alloc_stream.hpp"
#include "replay/byte_size.hpp"
#include "replay/native_model.hpp"
#include "replay/replayer.hpp"
#ifdef DELTA_REPLAY_HAS_DELTA
#include "replay/delta_target.hpp"
#endif

#include <delta/device.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

namespace deltactl {
namespace {

using namespace delta::replay;

struct ReplayArgs {
  std::string stream_path;
  std::string gpu = "h200";
  std::string capacity;
  std::size_t check_every = 1000;
  std::string policy = "both";
  bool json = false;
};

// On a terminal the percentage is redrawn in place; otherwise a line every 10%, and only once
// a replay has run for two seconds, so logs of short replays stay clean.
std::function<void(double)> progress_printer(const std::string& policy) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto last = std::make_shared<int>(-1);
  return [=](double fraction) {
    int percent = static_cast<int>(fraction * 100.0);
    int shown = tty ? percent : percent / 10 * 10;
    if (shown == *last || shown == 0) return;
    if (!tty && std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) return;
    *last = shown;
    if (tty) {
      std::fprintf(stderr, "\rreplaying %s: %3d%%%s", policy.c_str(), percent, percent == 100 ? "\n" : "");
    } else {
      std::fprintf(stderr, "replaying %s: %d%%\n", policy.c_str(), shown);
    }
  };
}

void run_replay(const ReplayArgs& args) {
  const delta::GpuProfile& profile = delta::gpu_profile(args.gpu);  // throws naming known GPUs
  const std::size_t capacity = args.capacity.empty() ? profile.memory_bytes : parse_byte_size(args.capacity);
  if (capacity == 0) throw std::invalid_argument("--capacity must be positive");

  AllocStream stream = read_alloc_stream(args.stream_path);

  ReplayOptions options;
  options.check_every = args.check_every;
  std::vector<ReplayResult> results;
  auto run = [&](ReplayTarget& target) {
    options.progress = progress_printer(target.name());
    results.push_back(replay(stream, target, options));
  };

  if (args.policy == "delta" || args.policy == "both") {
#ifdef DELTA_REPLAY_HAS_DELTA
    DeltaTargetOptions delta_options;
    delta_options.gpu = args.gpu;
    delta_options.capacity_bytes = capacity;
    DeltaTarget target(delta_options);
    run(target);
#else
    throw std::runtime_error("this deltactl was built without DELTA's allocator (allocator/ missing); "
                             "use --policy native");
#endif
  }
  if (args.policy == "native" || args.policy == "both") {
    NativeCachingModel target(NativeModelConfig{capacity});
    run(target);
  }

  if (args.json) {
    std::cout << replay_json(stream, results).dump(2) << '\n';
  } else {
    std::cout << "GPU " << profile.name << ", capacity " << format_bytes(capacity) << ", invariants checked every "
              << args.check_every << " events\n";
    print_replay_table(std::cout, stream, results);
  }
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Replay an alloc stream (from tools/importers/to_alloc_stream.py) through DELTA's allocator "
                "and/or a model of PyTorch's native caching allocator, on a simulated GPU, and compare "
                "fragmentation.");
  cmd->add_option("stream", args->stream_path, "alloc stream, .json or .json.gz")->required()->check(CLI::ExistingFile);
  cmd->add_option("--gpu", args->gpu, "simulated GPU profile: h200, a100, v100, titanv")->capture_default_str();
  cmd->add_option("--capacity", args->capacity, "device memory, e.g. 80GiB (default: the GPU profile's)");
  cmd->add_option("--check-every", args->check_every, "check allocator invariants every N events (0: never)")
      ->capture_default_str();
  cmd->add_option("--policy", args->policy, "which allocator to replay")
      ->check(CLI::IsMember({"delta", "native", "both"}))
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print the results as JSON");
  cmd->callback([args] { run_replay(*args); });
}

}  // namespace deltactl
