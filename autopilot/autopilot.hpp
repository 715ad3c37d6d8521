// Auto mode: a budget and nothing else. From the first allocation the job runs under the
// online policy (executor/online/online_policy.hpp), which holds the budget with no plan, while the
// recorder records it. Once the recorded iterations are complete, a thread plans the last one
// and the simulator validates the plan; at a step boundary the program is handed over to the
// executor running that plan (one log line).
//
// It watches itself. One plan per program shape it meets (a training step, an evaluation
// step, another sequence length), a shape being the step's structure (StepKey of its
// launches): at each boundary the plan for the shape of the step just run takes over, from
// memory or the plan cache; a shape without a plan is recorded and planned. A program that
// strays from the running plan mid-step (the executor's divergence) is handed back to the
// online policy at once, which holds the budget to the step's end. A plan whose steps keep
// running more than 10% off its prediction (StepWatch) is recorded and made again, once per
// shape. Plans are cached on disk, keyed by the shape: a second run starts planned.
//
// It sits at the entry points like the executor. It depends on the profiler (the recording),
// the planner and the executor; none of them knows it exists. Every call into whoever is in
// charge runs in a profiler::OwnWorkScope (profiler/directions/own_work.hpp): their copies and
// replays are DELTA's, and the recording, which may run meanwhile, leaves them out; the
// program's launch itself is issued after the entry point returns, outside the scope.
#pragma once

#include "autopilot/background_planner.hpp"
#include "autopilot/plan_cache.hpp"
#include "autopilot/steps/step_key.hpp"
#include "autopilot/steps/step_watch.hpp"
#include "executor/executor.hpp"
#include "executor/online/online_policy.hpp"
#include "profiler/sources/activity_source.hpp"
#include "profiler/recorder.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace delta::autopilot {

struct AutoOptions {
  std::uint64_t budget_bytes = 0;      // DELTA_BUDGET (required)
  std::uint64_t host_limit_bytes = 0;  // DELTA_HOST_BUDGET; 0: the executor's and the policy's defaults
  std::uint32_t record_iterations = 2; // DELTA_RECORD_ITERATIONS
  std::optional<double> plan_seconds;  // DELTA_PLAN_SECONDS: a limit on each plan's planning time; absent: none
  std::string gpu;                     // the GPU profile the planner models
  bool use_cache = true;
  std::string cache_dir;               // DELTA_PLAN_CACHE; empty: PlanCache::default_dir() (when use_cache)
  // The switch at a fixed boundary, the one after the planner starts, the program waiting for
  // the plan there (the sim, where runs must be repeatable); otherwise the first boundary at
  // which the plan is ready.
  bool wait_for_plan = false;
  bool copy_discards = true;           // ExecutorOptions::copy_discards
  StepWatchOptions watch;              // when a plan is made again for its steps' times
  std::uint32_t max_shapes = 8;        // shapes planned at most; past that, new ones run online
  // The clock step times are measured on, in ns (boundary to boundary); empty: steady_clock.
  std::function<std::uint64_t()> clock;
};

struct ShapeReport {
  std::string key;                    // StepKey hex of the step's launches
  std::string plan_from;              // "planner" or "cache"; empty: no plan (see `refused`)
  std::string refused;
  std::uint64_t predicted_step_time_ns = 0;
  std::uint32_t steps_planned = 0;    // steps run from start to end under its plan
  std::uint64_t last_step_time_ns = 0;  // the last of those
  std::uint32_t timing_replans = 0;
  std::uint32_t budget_replans = 0;   // made again for less: its steps went over the budget
  double calibration = 0;             // the first step judged over the prediction (StepWatch)
};

struct AutoReport {
  std::uint32_t planned_after = 0;  // iterations run before the first under a plan; 0: none ran under one
  std::string plan_from;            // the first plan's: "planner" or "cache"
  double planning_wall_seconds = 0; // the planner's wall time, all plans (not the program's)
  std::uint64_t plan_aimed_bytes = 0;  // the first plan's aim (below the budget: what cannot move)
  int plan_attempts = 0;            // the first plan's
  std::string refused;              // why no plan took over, when none did
  std::string cache_warning;        // a cache entry that could not be used
  std::string cache_key;            // the first shape's
  std::uint32_t plans_made = 0;     // planner runs
  std::uint32_t replans = 0;        // planner runs after the first (a new shape, or steps off their prediction)
  std::uint32_t timing_replans = 0; // ... for steps off their prediction
  std::uint32_t budget_replans = 0; // ... for steps over the budget under the plan
  std::uint32_t plan_switches = 0;  // a plan took over from the online policy
  std::uint32_t program_changes = 0;  // the program strayed from the running plan: back to the online policy
  std::vector<ShapeReport> shapes;  // in the order met
  executor::OnlineStats online;
  std::optional<executor::ExecutorStats> executor;  // the last plan's executor
};

class AutoPilot final : public executor::EntryPoints {
 public:
  struct Recording {
    std::unique_ptr<profiler::Recorder> recorder;
    std::unique_ptr<profiler::ActivitySource> source;  // feeds `recorder`; kept to the end
  };
  // `record`: the recorder and the activity source that suits the device (the sim's observer,
  // CUPTI), for `iterations` iterations, every step marked by the program. Called again for
  // each recording; the previous one is destroyed first.
  using RecordingFactory = std::function<Recording(std::uint32_t iterations)>;

  // Throws std::runtime_error for a budget the device cannot give, as the online policy does.
  AutoPilot(CachingAllocator& allocator, AutoOptions options, RecordingFactory record);
  ~AutoPilot() override;

  void* allocate(std::size_t size, StreamHandle stream) override;
  void deallocate(void* ptr) override;
  void before_launch(const executor::Launch& launch) override;
  void end_step() override;
  void finish() override;
  void check_invariants() const override;

  // --- for a launch route on a GPU (EntryPoints; autopilot_route.cpp) ---
  // Among every block the program holds (the shape of a step must not depend on who is in
  // charge: the executor keeps state only for the blocks its plan names).
  std::optional<std::pair<DevicePtr, std::size_t>> block_containing(DevicePtr ptr) const override;
  // Kept across hand-overs: whoever is in charge next is told again.
  void pin(DevicePtr ptr, std::size_t bytes) override;
  void before_module_unload(std::uintptr_t module) override;
  // A capture under a plan hands the program to the online policy first (the executor would
  // stray from its plan anyway), while waiting is still legal; no plan takes over until the
  // last capture has ended.
  void before_graph_capture() override;
  void after_graph_capture() override;

  AutoReport report() const;

 private:
  struct Shape {
    trace::Trace step;
    std::optional<plan::Plan> plan;
    double calibration = 0;  // its plan's steps over its prediction on this device (StepWatch); 0: not yet
    // What a plan made again must leave besides the layout margin: what its plan's steps held
    // above the budget (PlanSettings::extra_margin_bytes).
    std::uint64_t extra_margin_bytes = 0;
    ShapeReport report;
  };
  struct Live {
    std::uint64_t size = 0;
    StreamHandle stream = 0;
  };

  executor::EntryPoints& current() const;
  // autopilot_course.cpp: what happens at a boundary
  void at_boundary(const std::string& key, std::uint64_t step_ns);
  void start_recording();
  bool try_start_recording();  // false (a warning logged) when the recording cannot start
  bool record_again();         // the running shape to the online policy, recorded to be planned again
  void start_planner();
  void take_plan();
  void abandon_recording();
  bool plan_known(const std::string& key);  // in memory, or loaded from the cache
  // autopilot.cpp: the hand-overs
  void to_plan(const std::string& key);
  void to_online();  // callers say why (one log line)
  void after_executor_call();  // a divergence hands the program back at once
  void pin_again();            // pins_ told to whoever is now in charge

  CachingAllocator& allocator_;
  AutoOptions options_;
  RecordingFactory record_;
  Recording recording_;
  bool recording_on_ = false;
  std::vector<std::string> recorded_keys_;  // the shapes of the steps recorded so far
  std::unique_ptr<executor::OnlinePolicy> online_;  // always there; in charge while no plan runs
  std::unique_ptr<executor::Executor> executor_;    // while a plan runs
  std::optional<executor::ExecutorStats> last_executor_;
  std::unique_ptr<BackgroundPlanner> planner_;
  std::string planning_key_;                        // the shape being planned
  std::uint64_t over_budget_seen_ = 0;  // the running executor's over_budget_on_plan_bytes at the last boundary
  bool replanning_ = false;  // the running shape's plan is being made again (its time, or its budget)
  PlanCache cache_;
  std::map<std::string, Shape> shapes_;
  std::vector<std::string> shape_order_;
  std::string running_;                             // the shape whose plan runs; empty: online
  std::map<DevicePtr, Live> live_;                  // every block the program holds
  StepKey step_key_;                                // of the step in progress
  StepWatch watch_;
  std::uint64_t step_start_ns_ = 0;
  std::uint64_t host_limit_ = 0;  // the pinned host memory a plan may take: DELTA_HOST_BUDGET, or the default on a GPU
  std::uint32_t steps_ = 0;
  // pin()'s ranges, merged (start -> end): a capture pins every block its launches touch, each
  // launch again, and every hand-over tells them all to whoever takes over.
  std::map<DevicePtr, DevicePtr> pins_;
  int capturing_ = 0;                                     // graph captures in progress
  AutoReport report_;
  mutable std::mutex mutex_;  // the switch against stats readers; entry points come from the program
};

}  // namespace delta::autopilot
