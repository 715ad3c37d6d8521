#include "running/record_execute.hpp"

#include "common/exit_status.hpp"
#include "common/trace_args.hpp"
#include "trace/trace_loading.hpp"

#include "executor/step/step_program.hpp"
#include "logging/log.hpp"
#include "profiler/directions/direction_score.hpp"
#include "profiler/record_session.hpp"
#include "profiler/sources/sim_source.hpp"
#include "tools/execute/program_runner.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <memory>

namespace deltactl {
namespace {

using namespace delta;

// The recorder as the src/ layer drives it in a live job, plus a second recorder of the
// ground truth fed the same events.
class RecordingHooks final : public execute::ProgramHooks {
 public:
  explicit RecordingHooks(profiler::RecordSettings settings) : settings_(std::move(settings)) {}

  void on_device(SimDevice& sim) override {
    session_ = std::make_unique<profiler::RecordSession>(settings_, sim);
    profiler::RecorderOptions options;
    options.iterations = settings_.iterations;
    options.first_detection_at = static_cast<std::size_t>(-1);  // the runner marks every step
    truth_ = std::make_unique<profiler::Recorder>(options, profiler::sim_clock(sim));
    truth_->set_gpu({sim.profile().name, sim.profile().name, sim.mem_info().total_bytes});
    auto* source = dynamic_cast<profiler::SimActivitySource*>(&session_->source());
    if (!source) throw std::logic_error("deltactl execute --record: the session does not observe the sim");
    source->set_tap([this](const SimDevice::Activity& a) { profiler::SimActivitySource::record_truth(*truth_, a); });
  }
  void on_alloc(DevicePtr ptr, std::size_t size, StreamHandle stream) override {
    session_->on_alloc(ptr, size, stream);
    truth_->on_alloc(ptr, size, stream);
  }
  void on_free(DevicePtr ptr) override {
    session_->on_free(ptr);
    truth_->on_free(ptr);
  }
  void on_step() override {
    session_->step();
    truth_->mark_step();
  }
  void on_end() override {
    // Written by the session itself once its iterations are recorded (or here, if not yet).
    session_->finish_at_exit();
    learned_ = session_->finished_trace();
    truth_->finish();
    truth_trace_ = truth_->snapshot();
    truth_trace_.metadata["directions"] = "the sim's ground truth";
    if (session_->learner()) session_->learner()->check_invariants();
    session_.reset();  // stops observing while the device exists
  }

  const trace::Trace& learned() const { return learned_; }
  const trace::Trace& truth() const { return truth_trace_; }

 private:
  profiler::RecordSettings settings_;
  std::unique_ptr<profiler::RecordSession> session_;
  std::unique_ptr<profiler::Recorder> truth_;
  trace::Trace learned_, truth_trace_;
};

struct UseCounts {
  std::uint64_t read = 0, write = 0, touch = 0;
};
UseCounts count_uses(const trace::Trace& t) {
  UseCounts c;
  for (const trace::Op& op : t.ops)
    for (const trace::BlockUse& use : op.blocks)
      (use.access == trace::Access::read ? c.read : use.access == trace::Access::write ? c.write : c.touch)++;
  return c;
}

}  // namespace

void run_record_execute(const RecordExecuteArgs& args) {
  // The recorder's messages go where they go in a job: stderr, at DELTA_LOG_LEVEL.
  log::configure_from_environment();
  const trace::Trace input = planner::load_any_trace(args.trace_path);
  const std::string gpu = gpu_profile_for(input, args.gpu);
  const executor::StepProgram program = executor::step_program(input);

  profiler::RecordSettings settings;
  settings.mode = profiler::DeltaMode::record;
  settings.trace_path = args.out_path;
  settings.iterations = static_cast<std::uint32_t>(args.iterations);
  settings.marks_steps = true;
  // Two learning iterations give reads their second signal (direction_learner.hpp); a run of
  // one iteration learns writes only.
  settings.learning_iterations = args.opaque ? static_cast<std::uint32_t>(std::min<std::size_t>(2, args.iterations)) : 0;
  RecordingHooks hooks(settings);

  execute::ProgramOptions options;
  options.gpu = gpu;
  options.iterations = args.iterations;
  options.opaque = args.opaque;
  options.hooks = &hooks;
  const execute::ProgramRun run = execute::run_program(input, program, nullptr, options);
  if (!run.error.empty()) throw ExitStatus(1, "the program does not run in cache mode: " + run.error);
  if (!args.truth_path.empty()) trace::write_trace(hooks.truth(), args.truth_path);

  const profiler::DirectionScore score = profiler::score_directions(hooks.learned(), hooks.truth());
  const UseCounts uses = count_uses(hooks.learned());
  nlohmann::json j = {{"trace", args.trace_path},
                      {"recorded", args.out_path},
                      {"gpu", gpu},
                      {"iterations", args.iterations},
                      {"opaque", args.opaque},
                      {"learning_iterations", settings.learning_iterations},
                      {"ops", hooks.learned().ops.size()},
                      {"uses_read", uses.read},
                      {"uses_write", uses.write},
                      {"uses_touch", uses.touch},
                      {"kernel_uses", score.uses},
                      {"true_direction", score.exact},
                      {"true_direction_fraction", score.exact_fraction()},
                      {"left_touch", score.touches},
                      {"widened", score.widened},
                      {"writes_as_reads", score.writes_as_reads},
                      {"reads_lost", score.reads_lost},
                      {"step_times_ns", run.step_times_ns}};
  if (args.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "recorded " << args.iterations << " iterations of " << args.trace_path << " on a simulated " << gpu
              << (args.opaque ? " with opaque launches" : "") << " into " << args.out_path << "\n"
              << "  uses:       " << uses.read << " read, " << uses.write << " write, " << uses.touch << " touch\n"
              << "  directions: " << score.exact << " of " << score.uses << " kernel uses as the sim knows them ("
              << 100.0 * score.exact_fraction() << "%), " << score.touches << " left touch, " << score.widened
              << " read and write where the truth is one of them\n"
              << "  unsafe:     " << score.writes_as_reads << " writes learned as reads, " << score.reads_lost
              << " reads lost\n";
  }
  if (score.writes_as_reads != 0 || score.reads_lost != 0)
    throw ExitStatus(2, "a learned direction is unsafe: " + std::to_string(score.writes_as_reads) + " writes as reads, " +
                            std::to_string(score.reads_lost) + " reads lost");
}

}  // namespace deltactl
