// What sits at the program's entry points: every allocation and free, every launch, and the
// step markers. A plan's executor, the online policy (no plan) and auto mode (the online
// policy first, then a plan) all take this shape, so that a route (the sim's launch hook, an
// interposed driver call) and the program driving them need not know which one runs.
#pragma once

#include "executor/launch.hpp"

#include <delta/device.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace delta::executor {

class EntryPoints {
 public:
  virtual ~EntryPoints() = default;
  virtual void* allocate(std::size_t size, StreamHandle stream) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual void before_launch(const Launch& launch) = 0;
  virtual void end_step() = 0;
  // Brings every block back and waits for the copies in flight (the end of a run).
  virtual void finish() = 0;
  virtual void check_invariants() const = 0;  // throws InvariantError naming the block and the rule

  // --- what a launch route on a GPU asks (executor/routes/cuda_route.hpp) ---
  // The block this one keeps state for that contains `ptr`, as [address, address + size);
  // nullopt for any other address (blocks it does not keep state for never move).
  virtual std::optional<std::pair<DevicePtr, std::size_t>> block_containing(DevicePtr ptr) const = 0;
  // [ptr, ptr + bytes) may never leave the device again (a captured graph uses it, another
  // process maps it): brought back now when it is away, never evicted afterwards.
  virtual void pin(DevicePtr ptr, std::size_t bytes) = 0;
  // Before a module unloads: its launches cannot be replayed afterwards.
  virtual void before_module_unload(std::uintptr_t module) = 0;
  // A stream is about to capture a graph (called where device calls are still legal): every
  // block comes back, every copy completes, and until after_graph_capture nothing moves, so
  // that no call a capture forbids is made meanwhile. Nests.
  virtual void before_graph_capture() = 0;
  virtual void after_graph_capture() = 0;
};

}  // namespace delta::executor
