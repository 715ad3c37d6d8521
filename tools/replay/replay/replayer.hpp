// Replays an alloc stream through a ReplayTarget and measures what the policy did.
#pragma once

#include "replay/alloc_stream.hpp"
#include "replay/replay_target.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace delta::replay {

struct ReplayOptions {
  std::size_t check_every = 0;  // call check_invariants() after every N events; 0: never
  // Called with the fraction done (0..1] about every 1% of the events.
  std::function<void(double)> progress;
};

struct ReplayResult {
  std::string policy;
  std::size_t events = 0;           // initial live blocks included
  std::size_t peak_live = 0;        // the stream's peak of requested live bytes
  std::size_t peak_allocated = 0;   // the policy's peak of live block bytes (its rounding)
  std::size_t peak_reserved = 0;
  double reserved_over_live = 0;    // peak reserved / peak live: the fragmentation figure
  double mean_fragmentation = 0;    // time-weighted mean of 1 - allocated / reserved
  double cache_hit_rate = 0;        // hits / (hits + misses)
  std::uint64_t ooms = 0;           // allocations the policy could not serve
  std::uint64_t skipped_frees = 0;  // frees of blocks whose allocation failed
  std::uint64_t invariant_checks = 0;
  double seconds = 0;
  double events_per_second = 0;
};

// Initial live blocks are allocated first, in the order listed, then the events follow. An
// allocation that fails counts as an OOM and its free is skipped. A failed invariant check
// throws std::runtime_error naming the event after which it failed.
ReplayResult replay(const AllocStream& stream, ReplayTarget& target, const ReplayOptions& options = {});

}  // namespace delta::replay
