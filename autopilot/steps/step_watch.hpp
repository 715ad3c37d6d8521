// Auto mode watching itself: each step run under a plan, its time against the plan's
// prediction. One step off says little (a switch's first step brings every block back, a
// checkpoint writes, the machine is shared); several in a row say the plan was made for
// another machine state (clocks throttled, a neighbour on the copy link). So: the first
// `cool_down` steps after a plan takes over are not judged, and a plan is made again only
// after `patience` consecutive steps more than `tolerance` off, in either direction.
//
// Off from what: the prediction may have an error of its own for a given program, which no
// replan removes (the DTR logs at 0.5 executed 17-22% above it on the sim, steadily, while the
// planner left out the executor's copies of discarded blocks; it counts them now). Judged
// against the prediction alone, such a program would be planned again on every run.
// So the first step judged calibrates: the plan, made minutes ago from a recording on this
// device, runs as it runs; that step's time over the prediction is the model's error, and
// later steps are judged against the prediction times that ratio. What changes after (the
// device slows, a neighbour takes the copy link) is what the watch catches.
#pragma once

#include <cstdint>

namespace delta::autopilot {

struct StepWatchOptions {
  double tolerance = 0.10;     // |measured / predicted - 1| above this is off
  std::uint32_t patience = 3;  // consecutive steps off before a replan
  std::uint32_t cool_down = 1; // steps after a plan takes over that are not judged
};

class StepWatch {
 public:
  explicit StepWatch(StepWatchOptions options = {}) : options_(options) {}

  // A plan predicting `predicted_ns` a step takes over (0: nothing to judge against).
  // `calibrated`: the ratio of an earlier plan for the same program on this device, used in
  // place of a calibrating step (0: the first step judged calibrates).
  void start(std::uint64_t predicted_ns, double calibrated = 0);
  // One step under it took `measured_ns`; true once the plan should be made again (then the
  // watch stops judging until the next start()).
  bool step(std::uint64_t measured_ns);

  double last_ratio() const { return last_ratio_; }  // measured / predicted, of the last step judged
  double calibration() const { return calibration_; }  // the model's error: 0 until calibrated
  std::uint32_t off_in_a_row() const { return off_; }
  void check_invariants() const;  // throws std::logic_error naming the rule

 private:
  StepWatchOptions options_;
  std::uint64_t predicted_ = 0;
  std::uint32_t seen_ = 0;  // steps since start()
  std::uint32_t off_ = 0;
  bool fired_ = false;
  double last_ratio_ = 0;
  double calibration_ = 0;
};

}  // namespace delta::autopilot
