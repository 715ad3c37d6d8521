// What sits at the program's entry points: every allocation and free, every launch, and the
// step markers. A plan's executor, the online policy (no plan) and auto mode (the online
// policy first, then a plan) all take this shape, so that a route (the sim's launch hook, an
// interposed driver call) and the program driving them need not know which one runs.
#pragma once

#include "executor/launch.hpp"

#include <delta/device.hpp>

#include <cstddef>

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
};

}  // namespace delta::executor
