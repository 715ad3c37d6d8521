// Where planning time goes: each stage and pass of the planner marks itself with a StageScope,
// and the simulator counts its simulations against the stage that asked for them. Off unless
// switched on (`deltactl plan --timings`); off, a scope costs one relaxed load. Times are each
// stage's own (its inner stages' time is theirs), summed over the threads that ran it, so the
// rows add up to the planner's CPU time rather than to the wall clock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace delta::planner {

struct StageTime {
  std::string path;                 // the stage within those that called it, " › " between
  std::uint64_t calls = 0;          // times the stage was entered
  std::uint64_t simulations = 0;    // whole-step simulations it ran itself
  double self_seconds = 0;          // time in the stage itself, inner stages not counted
  double total_seconds = 0;         // with its inner stages
};

class StageClock {
 public:
  // Starts counting afresh (clearing what was counted) or stops counting.
  static void enable(bool on);
  static bool enabled();
  // What was counted since enable(true), the stages in the order first entered. Scopes still
  // open on other threads are not in it.
  static std::vector<StageTime> report();
};

// Marks the code from here to the end of the enclosing block as the stage `name` (a literal or
// a string that outlives the scope) within the stage the thread is in.
class StageScope {
 public:
  explicit StageScope(const char* name);
  ~StageScope();
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

  // The path of the stage this thread is in ("" at none): a worker thread started for it takes
  // it up with Inherit, so that its time counts there.
  static std::string current_path();
  class Inherit {
   public:
    explicit Inherit(const std::string& path);
    ~Inherit();
    Inherit(const Inherit&) = delete;
    Inherit& operator=(const Inherit&) = delete;

   private:
    bool active_ = false;
  };

 private:
  bool active_ = false;
};

// One whole-step simulation, counted against the thread's stage.
void count_simulation();

}  // namespace delta::planner
