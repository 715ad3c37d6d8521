// How well a trace's directions match the truth: the same recording with directions learned
// and with the directions the device knew (the sim's ground truth of opaque launches). Both
// traces must have the same ops and blocks; only their accesses may differ.
#pragma once

#include <delta/trace.hpp>

#include <cstdint>
#include <string>

namespace delta::profiler {

struct DirectionScore {
  std::uint64_t uses = 0;            // (kernel op, block) pairs of the truth
  std::uint64_t exact = 0;           // learned exactly as the truth: read, write, or read and write
  std::uint64_t touches = 0;         // left unknown
  std::uint64_t widened = 0;         // safe but wider than the truth (a write learned as read and write)
  std::uint64_t writes_as_reads = 0; // the truth writes, the learned trace only reads: unsafe
  std::uint64_t reads_lost = 0;      // the truth reads, the learned trace only writes: unsafe
  double exact_fraction() const { return uses ? double(exact) / double(uses) : 1.0; }
};

// Throws std::invalid_argument when the traces are not the same recording.
DirectionScore score_directions(const trace::Trace& learned, const trace::Trace& truth);

}  // namespace delta::profiler
