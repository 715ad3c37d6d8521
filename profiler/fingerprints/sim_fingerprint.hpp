// Fingerprints on the sim device: its stream-ordered digest (SimDevice::fingerprint), which
// takes device time like the CUDA fingerprint kernel would, so a learning iteration on the
// sim costs what the method costs.
#pragma once

#include "profiler/fingerprints/fingerprint.hpp"

#include <delta/sim_device.hpp>

namespace delta::profiler {

class SimFingerprinter final : public Fingerprinter {
 public:
  explicit SimFingerprinter(SimDevice& device) : device_(device) {}
  void submit(std::span<const FingerprintRange> ranges, std::uint64_t stream, std::uint64_t* out) override;
  void drain() override {}

 private:
  SimDevice& device_;
};

}  // namespace delta::profiler
