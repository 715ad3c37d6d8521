// Auto mode: a budget and nothing else. From the first allocation the job runs under the
// online policy (executor/online/online_policy.hpp), which holds the budget with no plan, while the
// recorder records it. Once the recorded iterations are complete, a thread plans the last one
// and the simulator validates the plan; at a step boundary the program is handed over to the
// executor running that plan (one log line). Plans are cached on disk, keyed by the program's
// structure: a second run recognises its program after its first step and switches then.
//
// It sits at the entry points like the executor. It depends on the profiler (the recording),
// the planner and the executor; none of them knows it exists.
#pragma once

#include "autopilot/background_planner.hpp"
#include "autopilot/plan_cache.hpp"
#include "autopilot/step_key.hpp"
#include "executor/executor.hpp"
#include "executor/online/online_policy.hpp"
#include "profiler/activity_source.hpp"
#include "profiler/recorder.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace delta::autopilot {

struct AutoOptions {
  std::uint64_t budget_bytes = 0;      // DELTA_BUDGET (required)
  std::uint64_t host_limit_bytes = 0;  // DELTA_HOST_BUDGET; 0: the executor's and the policy's defaults
  std::uint32_t record_iterations = 2; // DELTA_RECORD_ITERATIONS
  std::string gpu;                     // the GPU profile the planner models
  bool use_cache = true;
  std::string cache_dir;               // DELTA_PLAN_CACHE; empty: PlanCache::default_dir() (when use_cache)
  // The switch at a fixed boundary, the one after the planner starts, the program waiting for
  // the plan there (the sim, where runs must be repeatable); otherwise the first boundary at
  // which the plan is ready.
  bool wait_for_plan = false;
  bool copy_discards = true;           // ExecutorOptions::copy_discards
};

struct AutoReport {
  std::uint32_t planned_after = 0;  // iterations run before the first under a plan; 0: none ran under one
  std::string plan_from;            // "planner" or "cache" once switched
  double planning_wall_seconds = 0; // the planner's wall time (not the program's)
  std::uint64_t plan_aimed_bytes = 0;  // the budget the plan was made for (below the real one: what cannot move)
  int plan_attempts = 0;
  std::string refused;              // why no plan took over, when none did
  std::string cache_warning;        // a cache entry that could not be used
  std::string cache_key;
  executor::OnlineStats online;
  std::optional<executor::ExecutorStats> executor;
};

class AutoPilot final : public executor::EntryPoints {
 public:
  struct Recording {
    std::unique_ptr<profiler::Recorder> recorder;
    std::unique_ptr<profiler::ActivitySource> source;  // feeds `recorder`; kept to the end
  };
  // `record`: the recorder and the activity source that suits the device (the sim's observer,
  // CUPTI), for `iterations` iterations, every step marked by the program.
  using RecordingFactory = std::function<Recording(std::uint32_t iterations)>;

  // Throws std::runtime_error for a budget the device cannot give, as the online policy does.
  AutoPilot(CachingAllocator& allocator, AutoOptions options, const RecordingFactory& record);
  ~AutoPilot() override;

  void* allocate(std::size_t size, StreamHandle stream) override;
  void deallocate(void* ptr) override;
  void before_launch(const executor::Launch& launch) override;
  void end_step() override;
  void finish() override;
  void check_invariants() const override;

  AutoReport report() const;

 private:
  executor::EntryPoints& current() const;
  void at_boundary();
  void try_switch(const trace::Trace& step, const plan::Plan& plan, const std::string& from);

  CachingAllocator& allocator_;
  AutoOptions options_;
  Recording recording_;
  bool recording_done_ = false;
  std::unique_ptr<executor::OnlinePolicy> online_;
  std::unique_ptr<executor::Executor> executor_;
  std::optional<executor::OnlineStats> online_final_;  // the policy's, once it handed over
  BackgroundPlanner planner_;
  PlanCache cache_;
  StepKey first_step_;
  std::uint32_t steps_ = 0;
  AutoReport report_;
  mutable std::mutex mutex_;  // the switch against stats readers; entry points come from the program
};

}  // namespace delta::autopilot
