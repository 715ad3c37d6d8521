// A trace run as a program on the sim device, through DELTA's real code paths: the caching
// allocator's entry points, the sim device's launch hook (standing in for an interposed
// cuLaunchKernel) and, under a plan, the executor. Each op is a deterministic sim kernel whose
// outputs are a function of the bytes it reads and of its identity; every block is filled from
// its identity when allocated, so every read is defined. Memory holds digests, not bytes
// (SimContent::digest): logical sizes are kept, so a 100 GB step runs on a small machine.
#pragma once

#include "executor/step/action_schedule.hpp"
#include "executor/entry_points.hpp"
#include "executor/executor_stats.hpp"
#include "executor/step/step_program.hpp"

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>
#include <delta/trace.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace delta::execute {

// Told what the program does, as DELTA's entry points are told in a live job: a recorder
// watching a run (`deltactl execute --record`). Every call comes from the program's thread.
struct ProgramHooks {
  virtual ~ProgramHooks() = default;
  virtual void on_device(SimDevice&) {}  // the run's device, before the first allocation
  virtual void on_alloc(DevicePtr, std::size_t, StreamHandle) {}
  virtual void on_free(DevicePtr) {}     // before the block goes back
  virtual void on_step() {}              // an iteration ended (delta_step())
  virtual void on_end() {}               // the run ended; the device still exists
};

struct ProgramRun;

// In place of a plan, what sits at the program's entry points (the online policy, auto mode),
// made once the run's device and allocator exist. `observer` is the program's own view of the
// sim's activity (what each op read): a recorder that takes the device's observer must pass
// every activity on to it.
using EntryFactory = std::function<std::unique_ptr<executor::EntryPoints>(
    CachingAllocator&, SimDevice&, std::function<void(const SimDevice::Activity&)> observer)>;

struct ProgramOptions {
  std::string gpu;                        // a GPU profile name
  std::size_t iterations = 3;
  std::optional<std::uint64_t> perturb;   // seed: stray from the trace about once per 100 ops
  bool copy_discards = true;              // ExecutorOptions::copy_discards
  bool check_invariants = false;          // the executor's and the allocator's, after every op
  bool record_timeline = false;           // ProgramRun::timeline, of the last iteration
  // Called with the run's sim device before anything else runs on it (tests inject faults).
  std::function<void(SimDevice&)> prepare_device;
  bool opaque = false;                    // kernels show only their parameter bytes (SimLaunch::params)
  ProgramHooks* hooks = nullptr;
  // A program whose shape changes (program_shapes.hpp): iteration i runs
  // *shapes[shape_of_iteration[i]], each with the blocks and ops of `program` (other sizes and
  // times); empty: `program` in every iteration. Not under a plan.
  std::vector<const executor::StepProgram*> shapes;
  std::vector<std::uint32_t> shape_of_iteration;
  // The device slows down: from iteration `slow_from` on (1-based; 0: never), every kernel
  // takes `slow_factor` times its traced time (a clock throttled, a neighbour on the GPU).
  std::size_t slow_from = 0;
  double slow_factor = 1.0;
  bool slow_growing = false;  // slower still each iteration: slow_factor to the power of iterations since slow_from, plus one
  EntryFactory entry;  // with a null plan: runs the program through it rather than in cache mode
  // Called at the end of the run, before the entry points go, to read what they did.
  std::function<void(const executor::EntryPoints&, ProgramRun&)> report;
};

struct OpRecord {               // one op the program ran: what it read
  std::uint32_t iteration = 0;
  std::uint32_t op = 0;         // position in the step (perturbed extra ops: the op before)
  std::vector<std::uint64_t> blocks;   // block ids read
  std::vector<std::uint64_t> digests;  // their content as read
};

// The last iteration as it ran on the sim clock, times from the iteration's start: each op of
// the trace (its kernel, and what DELTA held on the device once it was issued), the copies
// on the executor's lanes and the replayed kernels.
struct ExecutedTimeline {
  struct Op {
    std::uint32_t op = 0;
    std::uint64_t start_ns = 0, end_ns = 0;
    std::uint64_t reserved_bytes = 0;
  };
  struct Span {
    std::uint64_t start_ns = 0, end_ns = 0, bytes = 0;
    bool to_host = false;  // copies: the direction
  };
  std::vector<Op> ops;
  std::vector<Span> copies;
  std::vector<Span> replays;
};

struct ProgramRun {
  std::vector<OpRecord> ops;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> final_blocks;  // (block id, digest) live at the end
  std::uint64_t step_time_ns = 0;         // the last iteration, on the sim clock
  std::vector<std::uint64_t> step_times_ns;
  std::uint64_t reserved_peak_bytes = 0;
  std::uint64_t unmapped_accesses = 0;
  std::uint64_t perturbations = 0;
  executor::ExecutorStats executor;       // under a plan
  std::string entry_stats;                // with ProgramOptions::entry: what `report` wrote
  ExecutedTimeline timeline;              // with ProgramOptions::record_timeline
  std::string error;                      // a hazard or failure that stopped the run
};

// `plan` null: cache mode. Never throws for what the run meets (it goes to `error`); throws
// std::invalid_argument for bad options.
ProgramRun run_program(const trace::Trace& trace, const executor::StepProgram& program,
                       const plan::Plan* plan, const ProgramOptions& options);

struct Comparison {
  bool identical = false;
  std::string first_mismatch;  // empty when identical: "iteration 2, op 17, block 44"
};
Comparison compare_runs(const ProgramRun& reference, const ProgramRun& run);

}  // namespace delta::execute
