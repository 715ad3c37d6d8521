// The online policy: holds a job within its budget with no plan. Auto mode runs it from the
// first allocation until a plan exists, and a program that strays from its plan falls back to
// it. Under memory pressure (an allocation, or a block coming back, that does not fit the
// budget) it evicts to pinned host memory the block that scores best by DTR's rule,
// cost / (size × staleness), with a swap's cost: the time to bring the block back (a fixed
// latency plus its bytes at the copy rate), so that, at equal staleness, large blocks go
// first and small ones, whose copies are mostly latency, stay. It swaps rather than drops:
// nothing is lost, whatever the program does next. Before every launch, every block it
// touches is brought back (the guard); launches never see a block away.
//
// Blocks of a page or more are placed on pages of their own, so that their pages can go and
// come back at the same address; smaller ones share pages and stay. The allocator is used
// through its public API only.
#pragma once

#include "executor/entry_points.hpp"

#include <delta/allocator.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace delta::executor {

struct OnlineOptions {
  std::uint64_t budget_bytes = 0;      // what DELTA may hold on the device (required)
  std::uint64_t host_limit_bytes = 0;  // pinned host memory it may take; 0: none on the sim, most of MemAvailable on a GPU
  // The score's model of bringing a block back: a fixed latency plus its bytes at this rate.
  std::uint64_t copy_latency_ns = 10'000;
  double copy_bytes_per_ns = 12.0;
  // Evictions start before room runs out: whenever less than this fraction of the budget is
  // free or on its way out, the best candidates start leaving, so that their copies run while
  // the program computes rather than while an allocation waits. 0: only on demand.
  double headroom = 0.05;
};

struct OnlineStats {
  std::uint64_t steps = 0, launches = 0;
  std::uint64_t evictions = 0;        // blocks sent away
  std::uint64_t copies_spared = 0;    // ... whose host copy was still current: no copy out
  std::uint64_t fetches = 0;          // blocks brought back by the guard
  std::uint64_t prefetches = 0;       // blocks brought back early, while there was room
  std::uint64_t bytes_d2h = 0, bytes_h2d = 0;
  std::uint64_t stall_ns = 0;         // compute streams held back waiting for copies back (sim clock)
  std::uint64_t pressure_waits = 0;   // host waits for an eviction to complete
  std::uint64_t host_wait_ns = 0;     // the host's time in those waits (sim clock)
  std::uint64_t budget_exceeded = 0;  // nothing left to evict: served above the budget
  std::uint64_t host_refusals = 0;    // evictions refused: no pinned memory within the host limit (the block stays)
  std::uint64_t host_pinned_peak = 0; // the most pinned host memory its slots held (bytes)
};
std::string to_json(const OnlineStats& stats);

// A live block as the policy placed it, when it hands the program over (to a plan).
struct HeldBlock {
  DevicePtr ptr = 0;
  std::uint64_t size = 0;
  StreamHandle stream = 0;
  bool own_pages = false;
};

class OnlinePolicy final : public EntryPoints {
 public:
  // Creates its copy streams and caps the allocator at the budget; throws std::runtime_error
  // when the budget is more than the device has.
  OnlinePolicy(CachingAllocator& allocator, OnlineOptions options);
  ~OnlinePolicy() override;
  OnlinePolicy(const OnlinePolicy&) = delete;
  OnlinePolicy& operator=(const OnlinePolicy&) = delete;

  void* allocate(std::size_t size, StreamHandle stream) override;
  void deallocate(void* ptr) override;
  void before_launch(const Launch& launch) override;
  void end_step() override;
  void finish() override;
  void check_invariants() const override;

  // --- for a launch route on a GPU (EntryPoints; online_pins.cpp) ---
  std::optional<std::pair<DevicePtr, std::size_t>> block_containing(DevicePtr ptr) const override;
  void pin(DevicePtr ptr, std::size_t bytes) override;
  void before_module_unload(std::uintptr_t module) override;  // nothing to do: the policy never replays
  void before_graph_capture() override;
  void after_graph_capture() override;

  // At a step boundary, before a plan takes over: every block back on the device, every copy
  // complete, the host slots let go; returns the live blocks. The policy stays usable (the
  // plan may yet be refused).
  std::vector<HeldBlock> hand_over();
  // The program handed back (by a plan's executor: the program strayed from the plan, or the
  // plan is being made again): `held` are every live block, resident, as they were placed;
  // those on pages of their own may leave again. Replaces whatever the policy knew. Throws
  // std::logic_error while a block it knows is still away (hand_over() comes first).
  void adopt(const std::vector<HeldBlock>& held);

  OnlineStats stats() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace delta::executor
