// Auto mode's course: online policy and recording, planning in the background, the switch at a
// step boundary, the plan cache.
#include "autopilot/autopilot.hpp"

#include "executor/step/step_program.hpp"
#include "logging/log.hpp"

#include <algorithm>
#include <exception>

namespace delta::autopilot {

AutoPilot::AutoPilot(CachingAllocator& allocator, AutoOptions options, const RecordingFactory& record)
    : allocator_(allocator),
      options_(std::move(options)),
      cache_(options_.use_cache ? PlanCache(options_.cache_dir) : PlanCache::none()) {
  if (options_.record_iterations == 0) throw std::invalid_argument("DELTA_RECORD_ITERATIONS must be at least 1");
  executor::OnlineOptions online;
  online.budget_bytes = options_.budget_bytes;
  online.host_limit_bytes = options_.host_limit_bytes;
  online_ = std::make_unique<executor::OnlinePolicy>(allocator_, online);
  recording_ = record(options_.record_iterations);
}

AutoPilot::~AutoPilot() = default;  // the planner's thread is waited for (BackgroundPlanner)

executor::EntryPoints& AutoPilot::current() const {
  if (executor_) return *executor_;
  return *online_;
}

void* AutoPilot::allocate(std::size_t size, StreamHandle stream) {
  std::lock_guard lock(mutex_);
  void* ptr = current().allocate(size, stream);
  if (steps_ == 0) first_step_.allocation(size);
  if (!recording_done_ && ptr) recording_.recorder->on_alloc(reinterpret_cast<std::uint64_t>(ptr), size, stream);
  return ptr;
}

void AutoPilot::deallocate(void* ptr) {
  std::lock_guard lock(mutex_);
  if (steps_ == 0) first_step_.free();
  if (!recording_done_) recording_.recorder->on_free(reinterpret_cast<std::uint64_t>(ptr));
  current().deallocate(ptr);
}

void AutoPilot::before_launch(const executor::Launch& launch) {
  std::lock_guard lock(mutex_);
  if (steps_ == 0) first_step_.launch(launch.name, launch.ranges.size());
  current().before_launch(launch);
}

void AutoPilot::end_step() {
  std::lock_guard lock(mutex_);
  current().end_step();
  ++steps_;
  if (!recording_done_) {
    recording_.recorder->mark_step();
    recording_done_ = recording_.recorder->finished();
  }
  if (!executor_) at_boundary();
}

// At a boundary under the online policy: after the first step, a cached plan for this
// program; once the recording is complete, the planner; when its plan is in, the switch.
void AutoPilot::at_boundary() {
  if (steps_ == 1 && !cache_.dir().empty()) {
    report_.cache_key = PlanCache::key(first_step_.hex(), options_.gpu, options_.budget_bytes);
    std::string warning;
    if (std::optional<CachedPlan> cached = cache_.load(report_.cache_key, &warning)) {
      try_switch(cached->step, cached->plan, "cache");
      if (executor_) return;
    } else if (!warning.empty()) {
      report_.cache_warning = warning;
      log::warn("DELTA auto: {}; planning again", warning);
    }
  }
  if (recording_done_ && !planner_.started()) {
    planner_.start(recording_.recorder->snapshot(), options_.gpu, options_.budget_bytes, allocator_.device().granularity());
    return;  // the program keeps running under the online policy meanwhile
  }
  if (!planner_.started() || planner_.taken()) return;
  if (!options_.wait_for_plan && !planner_.ready()) return;
  PlanOutcome outcome = planner_.take();
  report_.planning_wall_seconds = outcome.wall_seconds;
  report_.plan_aimed_bytes = outcome.aimed_bytes;
  report_.plan_attempts = outcome.attempts;
  if (!outcome.plan) {
    report_.refused = outcome.reason;
    log::warn("DELTA auto: no plan ({}); the online policy keeps the budget", outcome.reason);
    return;
  }
  try_switch(outcome.step, *outcome.plan, "planner");
  if (executor_ && !report_.cache_key.empty()) {
    try {
      cache_.store(report_.cache_key, {*outcome.plan, outcome.step});
    } catch (const std::exception& e) {
      log::warn("DELTA auto: the plan is not cached: {}", e.what());
    }
  }
}

// The program is handed to the executor: every block back, the step's persistent blocks
// adopted where they are. A plan the executor refuses leaves the online policy in charge.
void AutoPilot::try_switch(const trace::Trace& step, const plan::Plan& plan, const std::string& from) {
  try {
    executor::StepProgram program = executor::step_program(step);
    executor::ActionSchedule schedule = executor::schedule_actions(plan, step, program);
    const std::vector<executor::HeldBlock> held = online_->hand_over();
    std::vector<executor::AdoptedBlock> adopted;
    for (std::uint32_t b : program.persistent) {
      const trace::Block& block = step.blocks[b];
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
    next->adopt(adopted);
    online_final_ = online_->stats();
    executor_ = std::move(next);
    online_.reset();
    report_.planned_after = steps_;
    report_.plan_from = from;
    log::info("DELTA auto: after step {}, the plan ({}, {} blocks moved, predicted overhead {}) takes over from the "
              "online policy",
              steps_, from, plan.decisions.size(), plan.predicted.overhead);
  } catch (const std::exception& e) {
    report_.refused = e.what();
    log::warn("DELTA auto: the plan from the {} is refused ({}); the online policy keeps the budget", from, e.what());
  }
}

void AutoPilot::finish() {
  std::lock_guard lock(mutex_);
  current().finish();
}

void AutoPilot::check_invariants() const {
  std::lock_guard lock(mutex_);
  current().check_invariants();
}

AutoReport AutoPilot::report() const {
  std::lock_guard lock(mutex_);
  AutoReport out = report_;
  out.online = online_ ? online_->stats() : online_final_.value_or(executor::OnlineStats{});
  if (executor_) out.executor = executor_->stats();
  return out;
}

}  // namespace delta::autopilot
