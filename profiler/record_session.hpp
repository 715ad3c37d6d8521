// One recording, from start to the written file: the recorder, the activity source that suits
// the device (CUPTI on cuda, the observer on sim), and when the trace is written:
//   - as soon as the requested iterations are recorded (checked on every allocation, free and
//     step marker, never inside a CUPTI callback, where flushing is not allowed);
//   - when dump() is called (delta_trace_dump);
//   - at process exit, if it has not been written yet.
// Writing goes through delta::trace::write_trace, which replaces the file atomically.
#pragma once

#include "profiler/sources/activity_source.hpp"
#include "profiler/directions/direction_learner.hpp"
#include "profiler/fingerprints/fingerprint.hpp"
#include "profiler/directions/launch_learning.hpp"
#include "profiler/sources/wrapper_launches.hpp"
#include "profiler/record_settings.hpp"
#include "profiler/recorder.hpp"

#include <delta/device.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace delta::profiler {

class RecordSession {
 public:
  // Throws when the device's activity cannot be observed (no CUPTI, CUPTI held by another
  // profiler, a device of unknown kind), with the reason. `launches_interposed`: DELTA's driver
  // launch wrappers see every launch (libdelta preloaded from process start); learning
  // directions on a GPU needs them, and is refused without them.
  RecordSession(RecordSettings settings, Device& device, bool launches_interposed = false);
  ~RecordSession();
  RecordSession(const RecordSession&) = delete;
  RecordSession& operator=(const RecordSession&) = delete;

  void on_alloc(std::uint64_t address, std::uint64_t size, std::uint64_t stream);
  void on_free(std::uint64_t address);
  void step();
  void phase(trace::Phase phase) { recorder_->mark_phase(phase); }

  // Ends the recording and writes it to `path` (the configured path when empty). Later calls
  // write the same trace again (to another path, say); the exit handler writes nothing more.
  void dump(const std::string& path = {});
  // At exit: writes the trace unless it was written already. Never throws.
  void finish_at_exit() noexcept;

  bool written() const { return written_.load(std::memory_order_acquire); }
  const RecordSettings& settings() const { return settings_; }
  Recorder& recorder() { return *recorder_; }
  ActivitySource& source() { return *source_; }
  DirectionLearner* learner() { return learner_.get(); }
  // On a GPU with learning iterations: what the driver launch wrappers call (else null).
  LaunchLearning* launch_learning() { return launch_learning_.get(); }
  // On a GPU under LD_PRELOAD: the wrappers record the launches (else null: CUPTI callbacks do).
  WrapperLaunches* wrapper_launches() { return wrapper_launches_.get(); }
  // The trace as it would be written now (recording ended), directions learned included.
  trace::Trace finished_trace();
  void set_allocator_settings(std::map<std::string, std::string> settings);

 private:
  void write_when_finished();
  void write(const std::string& path, bool only_once);

  const RecordSettings settings_;
  std::unique_ptr<Recorder> recorder_;
  std::unique_ptr<Fingerprinter> fingerprinter_;
  std::unique_ptr<DirectionLearner> learner_;
  std::unique_ptr<CopyStager> stager_;
  std::unique_ptr<LaunchLearning> launch_learning_;
  std::unique_ptr<WrapperLaunches> wrapper_launches_;
  std::unique_ptr<ActivitySource> source_;
  std::map<std::string, std::string> allocator_settings_;
  std::string device_kind_;
  std::mutex write_mutex_;
  std::atomic<bool> written_{false};
};

}  // namespace delta::profiler
