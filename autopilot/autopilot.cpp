// Auto mode's entry points and its hand-overs: the online policy to a plan's executor at a
// step boundary, and back (the program strays from the plan, or the plan is made again).
#include "autopilot/autopilot.hpp"

#include "executor/host_pool.hpp"
#include "executor/step/step_program.hpp"
#include "profiler/directions/own_work.hpp"
#include "logging/log.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

namespace delta::autopilot {

AutoPilot::AutoPilot(CachingAllocator& allocator, AutoOptions options, RecordingFactory record)
    : allocator_(allocator),
      options_(std::move(options)),
      record_(std::move(record)),
      cache_(options_.use_cache ? PlanCache(options_.cache_dir) : PlanCache::none()),
      watch_(options_.watch) {
  if (options_.record_iterations == 0) throw std::invalid_argument("DELTA_RECORD_ITERATIONS must be at least 1");
  if (!options_.clock)
    options_.clock = [] {
      return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                            std::chrono::steady_clock::now().time_since_epoch())
                                            .count());
    };
  executor::OnlineOptions online;
  online.budget_bytes = options_.budget_bytes;
  online.host_limit_bytes = options_.host_limit_bytes;
  online_ = std::make_unique<executor::OnlinePolicy>(allocator_, online);
  host_limit_ = options_.host_limit_bytes != 0                 ? options_.host_limit_bytes
                : allocator_.device().kind() == "cuda" ? executor::default_host_limit()
                                                       : 0;  // the sim's pinned memory costs no RAM in digest mode
  start_recording();
  step_start_ns_ = options_.clock();
}

AutoPilot::~AutoPilot() = default;  // the planner's thread is waited for (BackgroundPlanner)

executor::EntryPoints& AutoPilot::current() const {
  if (executor_) return *executor_;
  return *online_;
}

void AutoPilot::after_executor_call() {
  if (!executor_ || executor_->on_plan()) return;
  report_.program_changes++;
  const std::string from = running_;
  to_online();
  log::info("DELTA auto: in step {}, the program strays from the plan for shape {}; the online policy takes over",
            steps_ + 1, from);
}

void* AutoPilot::allocate(std::size_t size, StreamHandle stream) {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  void* ptr = current().allocate(size, stream);
  if (!ptr) return ptr;
  live_[reinterpret_cast<DevicePtr>(ptr)] = {size, stream};
  after_executor_call();
  if (recording_on_) recording_.recorder->on_alloc(reinterpret_cast<std::uint64_t>(ptr), size, stream);
  return ptr;
}

void AutoPilot::deallocate(void* ptr) {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  if (recording_on_) recording_.recorder->on_free(reinterpret_cast<std::uint64_t>(ptr));
  live_.erase(reinterpret_cast<DevicePtr>(ptr));
  current().deallocate(ptr);
  after_executor_call();
}

void AutoPilot::before_launch(const executor::Launch& launch) {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  // The step's shape: its kernels, in order, and the bytes each touches (another batch size
  // or sequence length touches other sizes through the same kernels).
  step_key_.launch(launch.name, launch.ranges.size());
  for (const executor::LaunchRange& range : launch.ranges) step_key_.allocation(range.bytes);
  current().before_launch(launch);
  after_executor_call();
}

void AutoPilot::end_step() {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  current().end_step();
  after_executor_call();  // a step that ended short of the plan's
  ++steps_;
  if (capturing_ > 0) {  // no hand-over while a capture is active; the step's shape is not judged
    step_key_ = StepKey{};
    step_start_ns_ = options_.clock();
    if (recording_on_) abandon_recording();
    return;
  }
  const std::string key = step_key_.hex();
  step_key_ = StepKey{};
  const std::uint64_t now = options_.clock();
  const std::uint64_t step_ns = now - std::min(now, step_start_ns_);
  if (recording_on_) {
    recording_.recorder->mark_step();
    recorded_keys_.push_back(key);
  }
  at_boundary(key, step_ns);
  step_start_ns_ = options_.clock();
}

// The program is handed to the executor: every block back, the step's persistent blocks
// adopted where they are. A plan the executor refuses leaves the online policy in charge.
void AutoPilot::to_plan(const std::string& key) {
  Shape& shape = shapes_.at(key);
  try {
    executor::StepProgram program = executor::step_program(shape.step);
    executor::ActionSchedule schedule = executor::schedule_actions(*shape.plan, shape.step, program);
    const std::vector<executor::HeldBlock> held = online_->hand_over();
    std::vector<executor::AdoptedBlock> adopted;
    for (std::uint32_t b : program.persistent) {
      const trace::Block& block = shape.step.blocks[b];
      auto it = std::find_if(held.begin(), held.end(), [&](const executor::HeldBlock& h) {
        return h.ptr == block.address && h.size == block.size;
      });
      if (it != held.end()) adopted.push_back({b, it->ptr, it->stream, it->own_pages});
    }
    executor::ExecutorOptions eo;
    eo.budget_bytes = options_.budget_bytes;
    eo.copy_discards = options_.copy_discards;
    eo.host_limit_bytes = options_.host_limit_bytes;
    auto next = std::make_unique<executor::Executor>(allocator_, std::move(program), std::move(schedule), eo);
    over_budget_seen_ = 0;
    next->adopt(adopted);
    executor_ = std::move(next);
    pin_again();
    running_ = key;
    report_.plan_switches++;
    if (report_.planned_after == 0) {
      report_.planned_after = steps_;
      report_.plan_from = shape.report.plan_from;
    }
    watch_.start(shape.plan->predicted.step_time_ns, shape.calibration);
    log::info("DELTA auto: after step {}, the plan for shape {} ({}, {} blocks moved, predicted step {} ns) takes over",
              steps_, key, shape.report.plan_from, shape.plan->decisions.size(), shape.plan->predicted.step_time_ns);
  } catch (const std::exception& e) {
    shape.report.refused = e.what();
    shape.plan.reset();
    if (report_.refused.empty()) report_.refused = e.what();
    log::warn("DELTA auto: the plan for shape {} is refused ({}); the online policy keeps the budget", key, e.what());
  }
}

// The program is handed back to the online policy: every block back from the executor, the
// live blocks (the executor's as it placed them, the others where the allocator did) the
// policy's from here.
void AutoPilot::to_online() {
  const std::vector<executor::AdoptedBlock> placed = executor_->hand_over();
  std::vector<executor::HeldBlock> held;
  held.reserve(live_.size());
  for (const auto& [ptr, live] : live_) {
    auto it = std::find_if(placed.begin(), placed.end(), [&](const executor::AdoptedBlock& a) { return a.ptr == ptr; });
    held.push_back({ptr, live.size, live.stream, it != placed.end() && it->own_pages});
  }
  last_executor_ = executor_->stats();
  executor_.reset();
  online_->adopt(held);
  running_.clear();
  pin_again();
}

void AutoPilot::finish() {
  std::lock_guard lock(mutex_);
  profiler::OwnWorkScope own;
  current().finish();
}

void AutoPilot::check_invariants() const {
  std::lock_guard lock(mutex_);
  current().check_invariants();
  watch_.check_invariants();
  if (!running_.empty() != bool(executor_)) throw std::logic_error("AutoPilot: a running shape without its executor, or the reverse");
  if (executor_ && !shapes_.count(running_)) throw std::logic_error("AutoPilot: the running shape " + running_ + " is unknown");
  if (report_.plan_switches < report_.program_changes) throw std::logic_error("AutoPilot: more hand-backs than plans taken over");
  DevicePtr pinned_end = 0;
  for (const auto& [from, to] : pins_) {
    if (to <= from || (pinned_end != 0 && from <= pinned_end))
      throw std::logic_error("AutoPilot: the pinned range at " + std::to_string(from) + " is empty or overlaps or touches the one before it");
    pinned_end = to;
  }
  if (capturing_ < 0) throw std::logic_error("AutoPilot: more graph captures ended than began");
}

AutoReport AutoPilot::report() const {
  std::lock_guard lock(mutex_);
  AutoReport out = report_;
  out.online = online_->stats();
  if (executor_) out.executor = executor_->stats();
  else out.executor = last_executor_;
  for (const std::string& key : shape_order_) out.shapes.push_back(shapes_.at(key).report);
  return out;
}

}  // namespace delta::autopilot
