#include "profiler/record_session.hpp"

#include "profiler/directions/cuda_copy_stager.hpp"
#include "profiler/fingerprints/cuda_fingerprint.hpp"
#include "profiler/sources/cupti_source.hpp"
#include "profiler/fingerprints/sim_fingerprint.hpp"
#include "profiler/sources/sim_source.hpp"
#include "logging/log.hpp"

#include <delta/sim_device.hpp>

#include <stdexcept>

namespace delta::profiler {

RecordSession::RecordSession(RecordSettings settings, Device& device, bool launches_interposed)
    : settings_(std::move(settings)), device_kind_(device.kind()) {
  RecorderOptions options;
  options.iterations = settings_.iterations;
  if (settings_.marks_steps) options.first_detection_at = static_cast<std::size_t>(-1);
  if (SimDevice* sim = as_sim(&device)) {
    recorder_ = std::make_unique<Recorder>(options, sim_clock(*sim));
    recorder_->set_gpu({sim->profile().name, sim->profile().name, sim->mem_info().total_bytes});
    if (settings_.learning_iterations > 0) {
      fingerprinter_ = std::make_unique<SimFingerprinter>(*sim);
      learner_ = std::make_unique<DirectionLearner>(*fingerprinter_, settings_.learning_iterations);
    }
    source_ = std::make_unique<SimActivitySource>(*sim, *recorder_, learner_.get());
  } else if (device.kind() == "cuda") {
    // CUPTI callbacks may not launch the fingerprint kernel: learning runs in DELTA's driver
    // launch wrappers (launch_learning.hpp), which see launches only when libdelta was
    // preloaded from process start.
    if (settings_.learning_iterations > 0 && !launches_interposed)
      throw std::invalid_argument(
          "DELTA_MODE=record: learning directions on a GPU (DELTA_LEARNING_ITERATIONS=" +
          std::to_string(settings_.learning_iterations) +
          ") needs DELTA's driver launch wrappers: start the job with LD_PRELOAD=libdelta.so (and DELTA_PRELOAD "
          "not 0), or record without learning iterations");
    recorder_ = std::make_unique<Recorder>(options, cupti_clock());
    if (settings_.learning_iterations > 0) {
      fingerprinter_ = std::make_unique<CudaFingerprinter>();
      learner_ = std::make_unique<DirectionLearner>(*fingerprinter_, settings_.learning_iterations);
      stager_ = std::make_unique<CudaCopyStager>();
      launch_learning_ = std::make_unique<LaunchLearning>(*recorder_, *learner_, *stager_);
    }
    // Under LD_PRELOAD the wrappers see every launch: they record it, and CUPTI keeps the
    // durations (one cheap callback per launch for the correlation id).
    if (launches_interposed) wrapper_launches_ = std::make_unique<WrapperLaunches>(*recorder_);
    source_ = std::make_unique<CuptiActivitySource>(*recorder_, wrapper_launches_.get());
  } else {
    throw std::invalid_argument("DELTA_MODE=record: cannot observe launches on a device of kind '" +
                                std::string(device.kind()) + "'");
  }
  recorder_->set_metadata("recorded_on", device_kind_);
  recorder_->set_metadata("activity_source", source_->describe());
  log::info("DELTA recorder: recording {} iteration(s) to {} with {}", settings_.iterations, settings_.trace_path,
            source_->describe());
}

RecordSession::~RecordSession() {
  if (source_) source_->stop();
}

void RecordSession::set_allocator_settings(std::map<std::string, std::string> settings) {
  std::lock_guard lock(write_mutex_);
  allocator_settings_ = std::move(settings);
}

void RecordSession::on_alloc(std::uint64_t address, std::uint64_t size, std::uint64_t stream) {
  recorder_->on_alloc(address, size, stream);
  write_when_finished();
}

void RecordSession::on_free(std::uint64_t address) {
  recorder_->on_free(address);
  write_when_finished();
}

void RecordSession::step() {
  recorder_->mark_step();
  write_when_finished();
}

void RecordSession::write_when_finished() {
  if (!recorder_->finished() || written()) return;
  write(settings_.trace_path, true);
}

void RecordSession::dump(const std::string& path) { write(path.empty() ? settings_.trace_path : path, false); }


void RecordSession::finish_at_exit() noexcept {
  try {
    if (!written()) write(settings_.trace_path, true);
  } catch (const std::exception& e) {
    log::error("DELTA recorder: the trace could not be written at exit: {}", e.what());
  } catch (...) {
    log::error("DELTA recorder: the trace could not be written at exit");
  }
}

trace::Trace RecordSession::finished_trace() {
  recorder_->finish();
  source_->stop();
  trace::Trace trace = recorder_->snapshot();
  trace.allocator_settings = allocator_settings_;
  if (learner_) {
    const DirectionApplication applied = apply_directions(trace, learner_->conclude());
    const LearnerCounters& c = learner_->counters();
    trace.metadata["directions"] = "learned from fingerprints";
    trace.metadata["learning_iterations"] = std::to_string(learner_->learning_iterations());
    trace.metadata["learned_uses"] = std::to_string(applied.directed);
    trace.metadata["unlearned_uses"] = std::to_string(applied.left_touch);
    trace.metadata["learner_launches"] = std::to_string(c.launches_observed);
    trace.metadata["learner_bytes_fingerprinted"] = std::to_string(c.bytes_fingerprinted);
    trace.metadata["learner_replays"] = std::to_string(c.replays);
    if (launch_learning_) {
      // What the driver launch wrappers saw while learning (a GPU).
      const LaunchLearningCounters l = launch_learning_->counters();
      trace.metadata["learner_wrapper_launches"] = std::to_string(l.launches);
      trace.metadata["learner_unreadable_launches"] = std::to_string(l.unreadable);
      trace.metadata["learner_launches_during_capture"] = std::to_string(l.during_capture);
      trace.metadata["learner_failed_replays"] = std::to_string(l.failed_replays);
      trace.metadata["learner_no_room_for_copies"] = std::to_string(l.no_room);
    }
    // Blocks written by launches whose replays did not reproduce them: swap only (their
    // producing uses stay touches, which the planner never regenerates from).
    std::string ids;
    for (const std::uint64_t id : applied.swap_only) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    trace.metadata["swap_only_blocks"] = std::to_string(applied.swap_only.size());
    trace.metadata["swap_only_block_ids"] = ids;
  }
  return trace;
}

void RecordSession::write(const std::string& path, bool only_once) {
  std::lock_guard lock(write_mutex_);
  if (only_once && written()) return;
  // Writing ends the observation: CUPTI callbacks cost time on every launch, and stopping
  // flushes the durations of everything recorded.
  trace::Trace trace = finished_trace();
  trace.metadata["trace_path"] = path;
  trace::validate(trace);
  trace::write_trace(trace, path);
  written_.store(true, std::memory_order_release);
  log::info("DELTA recorder: wrote {} blocks, {} ops, {} iteration(s) to {}", trace.blocks.size(), trace.ops.size(),
            trace.iterations.size(), path);
}

}  // namespace delta::profiler
