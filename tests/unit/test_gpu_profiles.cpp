// The GPU profiles: lookup rules and the figures the timing model depends on.
#include <delta/device.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace delta;

TEST_CASE("profiles are found by name, case-insensitively", "[profiles]") {
  for (const char* name : {"h200", "a100", "v100", "titanv"}) {
    CHECK(gpu_profile(name).name == name);
  }
  CHECK(&gpu_profile("H200") == &gpu_profile("h200"));
  CHECK(&gpu_profile("TitanV") == &gpu_profile("titanv"));
  CHECK(&gpu_profile("A100") == &gpu_profile("a100"));
}

TEST_CASE("an unknown profile names the known ones", "[profiles]") {
  CHECK_THROWS_AS(gpu_profile("b200"), std::invalid_argument);
  CHECK_THROWS_AS(gpu_profile(""), std::invalid_argument);
  try {
    gpu_profile("rtx4090");
    FAIL("no exception");
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::Contains("rtx4090") && Catch::Contains("h200") && Catch::Contains("a100") &&
                            Catch::Contains("v100") && Catch::Contains("titanv"));
  }
}

TEST_CASE("profile figures match the hardware they describe", "[profiles]") {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const GpuProfile& h200 = gpu_profile("h200");
  const GpuProfile& a100 = gpu_profile("a100");
  const GpuProfile& v100 = gpu_profile("v100");
  const GpuProfile& titanv = gpu_profile("titanv");

  // Memory: 141 GB, 80 GB, 32 GB, 12 GB, in whole VMM pages.
  CHECK(h200.memory_bytes / kGiB == Approx(140.4).margin(0.5));
  CHECK(a100.memory_bytes == 80ull << 30);
  CHECK(v100.memory_bytes == 32ull << 30);
  CHECK(titanv.memory_bytes == 12ull << 30);
  for (const GpuProfile* profile : {&h200, &a100, &v100, &titanv}) {
    INFO(profile->name);
    CHECK(profile->memory_bytes % (2u << 20) == 0);
    CHECK(profile->h2d_bytes_per_s == profile->d2h_bytes_per_s);
    CHECK(profile->pageable_factor == Approx(0.5));
    CHECK(profile->launch_latency_ns >= 1000);
    CHECK(profile->launch_latency_ns <= 10000);
    CHECK(profile->fp16_flops > profile->fp32_flops);
    CHECK(profile->copy_engines == 2);
  }

  // PCIe per direction, pinned, as measured: Gen5 ~55, Gen4 ~25, Gen3 ~12 GB/s.
  CHECK(h200.h2d_bytes_per_s == Approx(55e9));
  CHECK(a100.h2d_bytes_per_s == Approx(25e9));
  CHECK(v100.h2d_bytes_per_s == Approx(12e9));
  CHECK(titanv.h2d_bytes_per_s == Approx(12e9));

  // Device memory bandwidth from the spec sheets.
  CHECK(h200.d2d_bytes_per_s == Approx(4.8e12));
  CHECK(a100.d2d_bytes_per_s == Approx(2.0e12).epsilon(0.03));
  CHECK(v100.d2d_bytes_per_s == Approx(900e9));
  CHECK(titanv.d2d_bytes_per_s == Approx(653e9));

  // Dense throughput.
  CHECK(h200.fp32_flops == Approx(67e12));
  CHECK(h200.fp16_flops == Approx(989e12).epsilon(0.01));
  CHECK(a100.fp32_flops == Approx(19.5e12));
  CHECK(a100.fp16_flops == Approx(312e12));
  CHECK(v100.fp16_flops == Approx(125e12));
  CHECK(titanv.fp32_flops == Approx(14.9e12).epsilon(0.02));
}

TEST_CASE("a device's name as the driver reports it finds its profile", "[profiles]") {
  CHECK(gpu_profile_for_device("NVIDIA H200") == "h200");
  CHECK(gpu_profile_for_device("NVIDIA A100-SXM4-80GB") == "a100");
  CHECK(gpu_profile_for_device("Tesla V100-SXM2-32GB") == "v100");
  CHECK(gpu_profile_for_device("NVIDIA TITAN V") == "titanv");
  CHECK(gpu_profile_for_device("NVIDIA H100 80GB HBM3").empty());
  CHECK(gpu_profile_for_device("NVIDIA RTX A1000 Laptop GPU").empty());  // no A100
  CHECK(gpu_profile_for_device("").empty());
}
