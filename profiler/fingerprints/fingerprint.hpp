// Fingerprints of device memory, taken in stream order: what the direction learner compares
// before and after a launch. A fingerprint is a 64-bit hash of a range's bytes; equal bytes
// give equal fingerprints wherever they live.
//
// The interface is asynchronous, as it must be on a GPU to stay cheap: submit() queues the
// work on the launch's stream (after the work before it, before the work after it) and the
// values are read only after drain(), which the learner calls once it needs them (when it
// draws its conclusions), never once per launch. On the sim the values are there at once.
#pragma once

#include <cstdint>
#include <span>

namespace delta::profiler {

struct FingerprintRange {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

class Fingerprinter {
 public:
  virtual ~Fingerprinter() = default;
  // Queues the fingerprints of `ranges` on `stream`; out[i] holds that of ranges[i] once
  // drain() has returned. `out` must stay valid until then.
  virtual void submit(std::span<const FingerprintRange> ranges, std::uint64_t stream, std::uint64_t* out) = 0;
  // Waits for every submitted fingerprint.
  virtual void drain() = 0;
};

}  // namespace delta::profiler
