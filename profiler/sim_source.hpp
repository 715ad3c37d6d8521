// The recorder fed by the sim device: every launch, copy and memset the sim issues, with the
// ranges it reads and writes. Unlike CUPTI the sim knows the direction of each access, so ops
// carry Access::read and Access::write, and durations are known at issue.
#pragma once

#include "profiler/activity_source.hpp"
#include "profiler/recorder.hpp"

#include <delta/sim_device.hpp>

#include <memory>

namespace delta::profiler {

// The clock of the sim (its virtual host time), for a Recorder that follows it.
Recorder::Clock sim_clock(SimDevice& device);

class SimActivitySource final : public ActivitySource {
 public:
  // Installs itself as the device's activity observer (replacing any other).
  SimActivitySource(SimDevice& device, Recorder& recorder);
  ~SimActivitySource() override;

  void flush() override {}
  void stop() override;
  std::string describe() const override;

  // The recording of one activity; public so it can be fed directly in tests.
  static void record(Recorder& recorder, const SimDevice::Activity& activity);

 private:
  SimDevice& device_;
  Recorder& recorder_;
  bool attached_ = false;
};

}  // namespace delta::profiler
