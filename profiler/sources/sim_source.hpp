// The recorder fed by the sim device: every launch, copy and memset the sim issues, with the
// ranges it reads and writes. Unlike CUPTI the sim knows the direction of each access, so ops
// carry Access::read and Access::write, and durations are known at issue; except for opaque
// launches (SimLaunch::params), which show their parameter bytes only, as on a GPU: their uses
// are touches found by scanning those bytes, unless a DirectionLearner is given. Then the
// source also takes the device's launch hook (standing in for DELTA's interposed
// cuLaunchKernel): before each opaque launch of a learning iteration it hands the learner the
// blocks the parameters point into, and after the launch it asks for their fingerprints again.
#pragma once

#include "profiler/sources/activity_source.hpp"
#include "profiler/directions/direction_learner.hpp"
#include "profiler/recorder.hpp"

#include <delta/sim_device.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace delta::profiler {

// The clock of the sim (its virtual host time), for a Recorder that follows it.
Recorder::Clock sim_clock(SimDevice& device);

class SimActivitySource final : public ActivitySource {
 public:
  // Installs itself as the device's activity observer (replacing any other).
  SimActivitySource(SimDevice& device, Recorder& recorder, DirectionLearner* learner = nullptr);
  ~SimActivitySource() override;

  // Called after the recording of every activity, with it (a second recorder of the ground
  // truth, in tests and `deltactl execute --record`). Set before the program runs.
  void set_tap(std::function<void(const SimDevice::Activity&)> tap) { tap_ = std::move(tap); }

  void flush() override {}
  void stop() override;
  std::string describe() const override;

  // The recording of one activity; public so it can be fed directly in tests.
  static void record(Recorder& recorder, const SimDevice::Activity& activity);
  // The same with the ground truth of an opaque launch (Activity::truth_*) in place of its
  // parameters: what the sim knows, for tests to compare a learned trace against.
  static void record_truth(Recorder& recorder, const SimDevice::Activity& activity);
  // The uses of one activity: its ranges, or for an opaque launch the pointers in its params.
  static void attribute(const SimDevice::Activity& activity, const BlockMap& blocks, trace::Op& op);

 private:
  void before_launch(const SimLaunch& launch, StreamHandle stream);
  void observe(const SimDevice::Activity& activity);
  // The replays of the last learning iteration (DirectionLearner::copies): copies staged
  // before the launch, replays on them after it. Memory of the device's own, outside the
  // allocator, held for one launch.
  struct Staged {
    SimLaunch capture;
    StreamHandle stream = 0;
    std::vector<TouchedBlock> blocks;
    DevicePtr base = 0;
    std::size_t bytes = 0;
    PhysHandle handle = 0;
    std::vector<FingerprintRange> exact, permuted;  // per block
  };
  // A launch between its hook and its activity, per program thread.
  struct InFlight {
    std::optional<std::size_t> ticket;
    std::optional<Staged> staged;
  };
  std::optional<Staged> stage(const SimLaunch& launch, StreamHandle stream, const std::vector<TouchedBlock>& blocks);
  void replay(const Staged& staged, std::size_t ticket);
  void release(const Staged& staged);
  static SimLaunch repointed(const Staged& staged, const std::vector<FingerprintRange>& copies);
  bool internal() const;  // this thread is issuing the source's own copies and replays

  SimDevice& device_;
  Recorder& recorder_;
  DirectionLearner* learner_;
  std::function<void(const SimDevice::Activity&)> tap_;
  bool attached_ = false;
  // The learner's view of the step: the kernel position of the next launch in its iteration,
  // and each thread's launch between its hook and its activity.
  std::mutex learning_mutex_;
  std::size_t position_iteration_ = 0;
  std::uint32_t next_position_ = 0;
  std::map<std::thread::id, InFlight> in_flight_;
};

}  // namespace delta::profiler
