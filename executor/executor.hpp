// The executor: runs a plan in the live program. It sits at the program's entry points —
// every allocation and free (the allocator's C ABI or preload shims) and every kernel launch
// (an interposed driver entry point, or the sim device's launch hook) — and on that clock
// evicts blocks to pinned host memory on a copy stream, unmaps their pages, maps them back
// and copies them in before they are needed, and regenerates dropped blocks by replaying the
// launches that produced them. Every CUDA call it makes comes from one of those entry points.
//
// Safety first: before every launch, every block it touches is made resident (waiting on a
// prefetch, fetching late, or rebuilding), so a wrong plan costs time, never data. A program
// that strays from the plan's step (another kernel, another size) is detected at once; every
// block away is brought back and the rest of the step runs as cache mode.
//
// The allocator is used through its public API only (placement on pages of its own, unmapping
// and mapping a live block's pages); it does not know the executor exists.
#pragma once

#include "executor/step/action_schedule.hpp"
#include "executor/entry_points.hpp"
#include "executor/executor_stats.hpp"
#include "executor/launch.hpp"
#include "executor/step/step_program.hpp"

#include <delta/allocator.hpp>
#include <delta/device.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace delta::executor {

struct ExecutorOptions {
  std::uint64_t budget_bytes = 0;  // what DELTA may hold on the device; 0: the plan's budget
  // A discarded block is copied to host before its pages go, so that a program straying from
  // its trace and reading it again still finds its data. Off: the plan's word that no op reads
  // it is trusted, and the copy lane is spared (DELTA_DISCARD=drop).
  bool copy_discards = true;
  // Pinned host memory the plan's copies may take (DELTA_HOST_BUDGET); 0: on a GPU, most of
  // the host memory available when run mode starts; on the sim, no limit.
  std::uint64_t host_limit_bytes = 0;
};

// A block the program already holds when a plan takes over at a step boundary (auto mode,
// from the online policy): one of the step's persistent blocks, resident.
struct AdoptedBlock {
  std::uint32_t block = 0;  // index into StepProgram::blocks
  DevicePtr ptr = 0;
  StreamHandle stream = 0;
  bool own_pages = false;   // placed on pages of its own
};

class Executor final : public EntryPoints {
 public:
  // Creates the copy streams and the pinned host pool up front; throws std::runtime_error
  // saying what does not fit. The allocator's limit is set to the budget.
  Executor(CachingAllocator& allocator, StepProgram program, ActionSchedule schedule, ExecutorOptions options = {});
  ~Executor() override;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // --- entry points ---
  void* allocate(std::size_t size, StreamHandle stream) override;
  void deallocate(void* ptr) override;
  void before_launch(const Launch& launch) override;
  void end_step() override;
  // Before a module is unloaded (cuModuleUnload, cuLibraryUnload): its launches cannot be
  // replayed afterwards, so every block waiting to be rebuilt is rebuilt now, and the plan's
  // later regenerations through that module are swapped instead.
  void before_module_unload(std::uintptr_t module) override;
  // Brings every block back and waits for the executor's copies (the end of a run).
  void finish() override;
  // Before the first entry point: the step's persistent blocks the program holds already are
  // the executor's, resident, and not expected as allocations. Throws std::runtime_error,
  // changing nothing, when one is not a persistent block of the step, or the plan moves it and
  // it does not sit on pages of its own.
  void adopt(const std::vector<AdoptedBlock>& held);
  // Auto mode hands the program back to the online policy (the program strayed, or the plan
  // is to be made again): every block comes back, every copy completes, blocks held back for
  // a replay go; returns the live blocks the executor keeps state for, as placed. The executor
  // runs as cache mode afterwards; it is meant to be destroyed.
  std::vector<AdoptedBlock> hand_over();
  // Whether the step so far matches the plan's (false from a divergence to the step's end).
  bool on_plan() const;

  // --- for a launch route on a GPU (executor/routes/cuda_route.hpp; executor_pins.cpp) ---
  // The block the executor keeps state for that contains `ptr`, as [address, address + size);
  // nullopt for every other address (the allocator's other blocks never move).
  std::optional<std::pair<DevicePtr, std::size_t>> block_containing(DevicePtr ptr) const override;
  // A stream is about to capture a graph. Called before the capture begins, where device calls
  // are still legal: every block comes back, every copy and unmap of the executor completes,
  // and until the matching after_graph_capture the step runs as cache mode, so that the
  // executor makes no VMM call, synchronization or event query while a capture is active.
  void before_graph_capture() override;
  void after_graph_capture() override;
  // [ptr, ptr + bytes) may never leave the device again (a captured graph uses it, another
  // process maps it, a communication library registered it): brought back now when it is
  // away, and every later eviction of a block overlapping it is skipped (pinned_skips).
  void pin(DevicePtr ptr, std::size_t bytes) override;

  ExecutorStats stats() const;
  void check_invariants() const override;  // throws InvariantError naming the block and the rule
  std::string state_json() const;  // for dumps

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace delta::executor
