// The GPU models DELTA knows how to simulate. Figures come from the public spec sheets, except
// the PCIe rates, which are what a pinned one-direction copy measures in practice (x16 link:
// Gen3 ~12 GB/s, Gen4 ~25 GB/s, Gen5 ~55 GB/s of 63 theoretical); device memory bandwidth is
// the spec sheet's peak. Memory sizes are what the driver reports as total, rounded down to
// the 2 MiB VMM granularity.
#include <delta/device.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>
#include <string>

namespace delta {

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

GpuProfile make_profile(std::string name, std::size_t memory_bytes, double pcie_bytes_per_s,
                        double hbm_bytes_per_s, double launch_latency_ns, double fp32_flops,
                        double fp16_flops) {
  GpuProfile profile;
  profile.name = std::move(name);
  profile.memory_bytes = memory_bytes;
  profile.h2d_bytes_per_s = pcie_bytes_per_s;
  profile.d2h_bytes_per_s = pcie_bytes_per_s;
  profile.pageable_factor = 0.5;  // pageable copies are staged through a driver bounce buffer
  profile.d2d_bytes_per_s = hbm_bytes_per_s;
  profile.launch_latency_ns = launch_latency_ns;
  profile.fp32_flops = fp32_flops;
  profile.fp16_flops = fp16_flops;
  profile.copy_engines = 2;  // one engine per direction is what concurrent h2d + d2h can use
  return profile;
}

const std::array<GpuProfile, 4>& all_profiles() {
  static const std::array<GpuProfile, 4> profiles = {
      // H200 SXM: 141 GB HBM3e (the driver reports 143771 MiB), 4.8 TB/s, PCIe Gen5 x16,
      // 67 TFLOPS fp32, 989 TFLOPS dense fp16/bf16 tensor.
      make_profile("h200", 143770 * kMiB, 55e9, 4.8e12, 4000, 67e12, 989e12),
      // A100 SXM 80 GB: HBM2e ~2.0 TB/s, PCIe Gen4 x16, 19.5 TFLOPS fp32, 312 TFLOPS fp16.
      make_profile("a100", 80 * kGiB, 25e9, 2.0e12, 4000, 19.5e12, 312e12),
      // V100 SXM2 32 GB: HBM2 900 GB/s, PCIe Gen3 x16, 15.7 TFLOPS fp32, 125 TFLOPS fp16.
      make_profile("v100", 32 * kGiB, 12e9, 900e9, 5000, 15.7e12, 125e12),
      // Titan V 12 GB: HBM2 653 GB/s, PCIe Gen3 x16, 14.9 TFLOPS fp32, 110 TFLOPS fp16.
      make_profile("titanv", 12 * kGiB, 12e9, 653e9, 5000, 14.9e12, 110e12),
  };
  return profiles;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

const GpuProfile& gpu_profile(std::string_view name) {
  const std::string wanted = lowercase(name);
  std::string known;
  for (const GpuProfile& profile : all_profiles()) {
    if (profile.name == wanted) return profile;
    known += known.empty() ? profile.name : ", " + profile.name;
  }
  throw std::invalid_argument("unknown GPU profile '" + std::string(name) + "' (known: " + known + ")");
}

std::string gpu_profile_for_device(std::string_view device_name) {
  // Letters and digits only, lower case: "TITAN V" and "Titan-V" both read "titanv".
  std::string squeezed;
  for (const unsigned char c : device_name)
    if (std::isalnum(c)) squeezed += static_cast<char>(std::tolower(c));
  for (const GpuProfile& profile : all_profiles()) {
    // Not followed by a digit: an "RTX A1000" is no A100.
    for (std::size_t at = squeezed.find(profile.name); at != std::string::npos; at = squeezed.find(profile.name, at + 1)) {
      const std::size_t end = at + profile.name.size();
      if (end == squeezed.size() || !std::isdigit(static_cast<unsigned char>(squeezed[end]))) return profile.name;
    }
  }
  return "";
}

}  // namespace delta
