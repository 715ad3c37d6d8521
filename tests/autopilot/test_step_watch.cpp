// StepWatch: when auto mode makes a plan again for its steps' times. Not judged during the
// cool-down; the first step judged calibrates (the model's own error); fires only after
// `patience` consecutive steps off the calibrated prediction by more than the tolerance,
// either way; once per start().
#include "autopilot/steps/step_watch.hpp"

#include <catch2/catch.hpp>

using delta::autopilot::StepWatch;
using delta::autopilot::StepWatchOptions;

TEST_CASE("the step watch: cool-down, calibration, hysteresis, once per plan", "[autopilot][watch]") {
  StepWatch watch(StepWatchOptions{});  // 10%, 3 in a row, 1 step of cool-down
  CHECK_FALSE(watch.step(5000));  // nothing to judge against yet
  watch.start(1000);
  CHECK_FALSE(watch.step(5000));  // the switch's own step: not judged
  CHECK(watch.calibration() == 0);
  CHECK_FALSE(watch.step(1200));  // calibrates: the plan runs 1.2 times its prediction here
  CHECK(watch.calibration() == Approx(1.2));
  CHECK(watch.off_in_a_row() == 0);
  CHECK_FALSE(watch.step(1300));  // 8% above the calibrated prediction: on
  CHECK(watch.off_in_a_row() == 0);
  CHECK_FALSE(watch.step(1400));
  CHECK_FALSE(watch.step(1000));  // off the other way counts too
  CHECK(watch.off_in_a_row() == 2);
  CHECK_FALSE(watch.step(1250));  // within 10%: the run of steps off starts again
  CHECK(watch.off_in_a_row() == 0);
  CHECK_FALSE(watch.step(1500));
  CHECK_FALSE(watch.step(1500));
  watch.check_invariants();
  CHECK(watch.step(1500));        // the third in a row
  CHECK(watch.last_ratio() == Approx(1.5));
  for (int i = 0; i < 10; ++i) CHECK_FALSE(watch.step(3000));  // once: not again until a new plan
  watch.check_invariants();

  watch.start(1000, 1.2);         // the same plan again, its calibration known: judged at once
  CHECK_FALSE(watch.step(9999));  // cool-down
  CHECK_FALSE(watch.step(1500));
  CHECK_FALSE(watch.step(1500));
  CHECK(watch.step(1500));
  watch.start(0);                 // no prediction: never judged
  for (int i = 0; i < 10; ++i) CHECK_FALSE(watch.step(1));
  watch.check_invariants();
}

TEST_CASE("the step watch: a patience of one fires on the first step off", "[autopilot][watch]") {
  StepWatch watch({0.05, 1, 0});
  watch.start(100, 1.0);
  CHECK_FALSE(watch.step(104));
  CHECK(watch.step(106));
  StepWatch zero({0.05, 0, 0});
  CHECK_THROWS_WITH(zero.check_invariants(), Catch::Contains("patience of 0"));
}
