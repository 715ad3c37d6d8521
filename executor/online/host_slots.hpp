// Pinned host memory for the online policy, which learns what it evicts only as it goes: one
// slot per block away, taken when the block first leaves and kept for its life (a block that
// leaves again reuses it), given back to an idle list when the block is freed, so that a
// training loop, which frees and allocates the same sizes every step, pins nothing new after
// its first steps. Within a limit (DELTA_HOST_BUDGET): past it, idle slots are let go first,
// then the slot is refused and the block stays on the device.
#pragma once

#include <delta/device.hpp>

#include <cstdint>
#include <map>

namespace delta::executor {

class HostSlots {
 public:
  HostSlots(Device& device, std::uint64_t limit_bytes);  // limit 0: none
  ~HostSlots();
  HostSlots(const HostSlots&) = delete;
  HostSlots& operator=(const HostSlots&) = delete;

  // A slot of at least `bytes`, or nullptr when the limit (or the device) refuses it.
  void* take(std::uint64_t bytes);
  // `slot` came from take(bytes); it is kept for the next take of the same size.
  void give_back(void* slot, std::uint64_t bytes);
  void release_idle();  // unpins every idle slot

  std::uint64_t pinned_bytes() const { return pinned_; }
  std::uint64_t in_use_bytes() const { return in_use_; }
  void check() const;  // throws InvariantError: the counts agree with the slots

  static std::uint64_t rounded(std::uint64_t bytes);  // slots come in 64 KiB steps

 private:
  Device& device_;
  std::uint64_t limit_;
  std::multimap<std::uint64_t, void*> idle_;  // by rounded size
  std::uint64_t pinned_ = 0, in_use_ = 0;
};

}  // namespace delta::executor
