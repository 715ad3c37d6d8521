#include "profiler/fingerprints/sim_fingerprint.hpp"

#include <vector>

namespace delta::profiler {

void SimFingerprinter::submit(std::span<const FingerprintRange> ranges, std::uint64_t stream, std::uint64_t* out) {
  std::vector<SimRange> sim_ranges;
  sim_ranges.reserve(ranges.size());
  for (const FingerprintRange& range : ranges) sim_ranges.push_back({range.address, range.bytes});
  const std::vector<std::uint64_t> values = device_.fingerprint(sim_ranges, stream);
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
}

}  // namespace delta::profiler
