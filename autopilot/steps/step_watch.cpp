#include "autopilot/steps/step_watch.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace delta::autopilot {

void StepWatch::start(std::uint64_t predicted_ns, double calibrated) {
  predicted_ = predicted_ns;
  calibration_ = calibrated;
  seen_ = 0;
  off_ = 0;
  fired_ = false;
  last_ratio_ = 0;
}

bool StepWatch::step(std::uint64_t measured_ns) {
  if (predicted_ == 0 || fired_) return false;
  if (++seen_ <= options_.cool_down) return false;
  last_ratio_ = double(measured_ns) / double(predicted_);
  if (calibration_ <= 0) {  // the first step judged: the model's error, not a change
    calibration_ = last_ratio_;
    return false;
  }
  off_ = std::abs(last_ratio_ / calibration_ - 1.0) > options_.tolerance ? off_ + 1 : 0;
  if (off_ < options_.patience) return false;
  fired_ = true;
  return true;
}

void StepWatch::check_invariants() const {
  if (off_ > seen_) throw std::logic_error("StepWatch: " + std::to_string(off_) + " steps off of " + std::to_string(seen_) + " seen");
  if (fired_ && off_ < options_.patience) throw std::logic_error("StepWatch: fired before its patience ran out");
  if (seen_ > options_.cool_down && predicted_ != 0 && !(calibration_ > 0))
    throw std::logic_error("StepWatch: steps judged without a calibration");
  if (options_.patience == 0) throw std::logic_error("StepWatch: a patience of 0 would fire on nothing");
}

}  // namespace delta::autopilot
