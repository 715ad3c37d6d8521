// Choosing a device: DELTA_DEVICE parsing, the DELTA_SIM_* settings and the auto fallback.
#include <delta/sim_device.hpp>

#include "device/sim/sim_device_impl.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>

using namespace delta;

namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = kKiB * 1024;
constexpr std::size_t kGiB = kMiB * 1024;

// Sets the DELTA_* device variables for one test and puts the old values back afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> values) {
    for (const char* name :
         {"DELTA_DEVICE", "DELTA_SIM_PROFILE", "DELTA_SIM_CAPACITY", "DELTA_SIM_BACKING", "DELTA_SIM_CONTENT"}) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) apply(name, value);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) apply(name, value);
  }

 private:
  static void apply(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

std::string invalid_argument_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  FAIL("expected std::invalid_argument");
  return {};
}

// What the cuda device does on this machine: nullopt when it works, else its error code.
std::optional<DeviceErrc> cuda_failure() {
  try {
    make_cuda_device(0);
    return std::nullopt;
  } catch (const DeviceError& error) {
    return error.code();
  }
}

}  // namespace

TEST_CASE("parse_device_kind accepts auto, cuda and sim", "[factory]") {
  CHECK(parse_device_kind("auto") == DeviceKind::automatic);
  CHECK(parse_device_kind("cuda") == DeviceKind::cuda);
  CHECK(parse_device_kind("sim") == DeviceKind::sim);
  CHECK(parse_device_kind("SIM") == DeviceKind::sim);
  CHECK(parse_device_kind(" Cuda ") == DeviceKind::cuda);
  for (const char* bad : {"", "gpu", "simulated", "cuda0", "au to"}) {
    INFO("'" << bad << "'");
    const std::string message = invalid_argument_message([&] { parse_device_kind(bad); });
    CHECK_THAT(message, Catch::Contains("DELTA_DEVICE") && Catch::Contains("'" + std::string(bad) + "'") &&
                            Catch::Contains("auto, cuda, sim"));
  }
}

TEST_CASE("capacities parse with and without units", "[factory]") {
  CHECK(sim::parse_capacity("0") == 0);
  CHECK(sim::parse_capacity("17179869184") == 16 * kGiB);
  CHECK(sim::parse_capacity("16GiB") == 16 * kGiB);
  CHECK(sim::parse_capacity("16G") == 16 * kGiB);
  CHECK(sim::parse_capacity("16gib") == 16 * kGiB);
  CHECK(sim::parse_capacity(" 16 GiB ") == 16 * kGiB);
  CHECK(sim::parse_capacity("512MiB") == 512 * kMiB);
  CHECK(sim::parse_capacity("512M") == 512 * kMiB);
  CHECK(sim::parse_capacity("64K") == 64 * kKiB);
  CHECK(sim::parse_capacity("64KiB") == 64 * kKiB);
  CHECK(sim::parse_capacity("2TiB") == 2048 * kGiB);
  CHECK(sim::parse_capacity("80GB") == 80'000'000'000ull);
  CHECK(sim::parse_capacity("500MB") == 500'000'000ull);
  CHECK(sim::parse_capacity("1.5GiB") == 3 * kGiB / 2);
  CHECK(sim::parse_capacity("4096B") == 4096);
}

TEST_CASE("malformed capacities name the variable and the value", "[factory]") {
  for (const char* bad : {"", "GiB", "abc", "-1", "16XB", "1.2.3G", "16 G B", ".", "1e9", "99999999999999999999TB"}) {
    INFO("'" << bad << "'");
    const std::string message = invalid_argument_message([&] { sim::parse_capacity(bad); });
    CHECK_THAT(message, Catch::Contains("DELTA_SIM_CAPACITY") && Catch::Contains("'" + std::string(bad) + "'"));
  }
}

TEST_CASE("make_sim_device builds the sim the options describe", "[factory]") {
  auto device = make_sim_device();
  REQUIRE(as_sim(device.get()) != nullptr);
  CHECK(device->kind() == "sim");
  CHECK(as_sim(device.get())->profile().name == "h200");
  CHECK(device->mem_info().total_bytes == gpu_profile("h200").memory_bytes);

  SimOptions options;
  options.profile = "v100";
  options.capacity_bytes = 6 * kGiB;
  auto small = make_sim_device(options);
  CHECK(as_sim(small.get())->profile().name == "v100");
  CHECK(small->mem_info().total_bytes == 6 * kGiB);
}

TEST_CASE("DELTA_DEVICE=sim with every DELTA_SIM_ setting", "[factory][env]") {
  ScopedEnv env({{"DELTA_DEVICE", "sim"},
                 {"DELTA_SIM_PROFILE", "A100"},
                 {"DELTA_SIM_CAPACITY", "16GiB"},
                 {"DELTA_SIM_BACKING", "0"}});
  auto device = make_device_from_env(3);
  SimDevice* sim = as_sim(device.get());
  REQUIRE(sim != nullptr);
  CHECK(device->ordinal() == 3);
  CHECK(sim->profile().name == "a100");
  CHECK(device->mem_info().total_bytes == 16 * kGiB);
  // Without backing, host access to mapped bytes is refused.
  const DevicePtr va = device->reserve(2 * kMiB);
  device->map(va, 2 * kMiB, device->create_physical(2 * kMiB));
  std::uint8_t byte = 0;
  try {
    sim->write(va, std::span<const std::uint8_t>(&byte, 1));
    FAIL("write succeeded on unbacked memory");
  } catch (const DeviceError& error) {
    CHECK(error.code() == DeviceErrc::invalid_value);
  }
}

TEST_CASE("DELTA_DEVICE=sim defaults to a backed H200", "[factory][env]") {
  ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_BACKING", "1"}});
  auto device = make_device_from_env();
  SimDevice* sim = as_sim(device.get());
  REQUIRE(sim != nullptr);
  CHECK(device->ordinal() == 0);
  CHECK(sim->profile().name == "h200");
  CHECK(device->mem_info().total_bytes == gpu_profile("h200").memory_bytes);
  const DevicePtr va = device->reserve(2 * kMiB);
  device->map(va, 2 * kMiB, device->create_physical(2 * kMiB));
  const std::uint8_t in = 0x7F;
  std::uint8_t out = 0;
  sim->write(va, std::span<const std::uint8_t>(&in, 1));
  sim->read(va, std::span<std::uint8_t>(&out, 1));
  CHECK(out == 0x7F);
}

TEST_CASE("DELTA_SIM_CONTENT chooses what the sim stores", "[factory][env]") {
  for (const auto& [text, expected] : {std::pair{"bytes", SimContent::bytes}, std::pair{" Digest ", SimContent::digest},
                                       std::pair{"none", SimContent::none}}) {
    INFO("'" << text << "'");
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_CONTENT", text}});
    auto device = make_device_from_env();
    CHECK(as_sim(device.get())->content() == expected);
  }
  {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}});
    CHECK(as_sim(make_device_from_env().get())->content() == SimContent::bytes);  // the default
  }
  {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_BACKING", "0"}});
    CHECK(as_sim(make_device_from_env().get())->content() == SimContent::none);  // the older switch
  }
  {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_BACKING", "0"}, {"DELTA_SIM_CONTENT", "none"}});
    CHECK(as_sim(make_device_from_env().get())->content() == SimContent::none);  // both agree
  }
  {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_BACKING", "1"}, {"DELTA_SIM_CONTENT", "digest"}});
    CHECK(as_sim(make_device_from_env().get())->content() == SimContent::digest);
  }
}

TEST_CASE("bad settings are rejected with the variable's name", "[factory][env]") {
  SECTION("DELTA_DEVICE") {
    ScopedEnv env({{"DELTA_DEVICE", "gpu"}});
    CHECK_THAT(invalid_argument_message([] { make_device_from_env(); }),
               Catch::Contains("DELTA_DEVICE") && Catch::Contains("gpu"));
  }
  SECTION("DELTA_SIM_PROFILE") {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_PROFILE", "b100"}});
    CHECK_THAT(invalid_argument_message([] { make_device_from_env(); }),
               Catch::Contains("DELTA_SIM_PROFILE") && Catch::Contains("b100") && Catch::Contains("h200"));
  }
  SECTION("DELTA_SIM_CAPACITY") {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_CAPACITY", "lots"}});
    CHECK_THAT(invalid_argument_message([] { make_device_from_env(); }),
               Catch::Contains("DELTA_SIM_CAPACITY") && Catch::Contains("lots"));
  }
  SECTION("DELTA_SIM_BACKING") {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_BACKING", "maybe"}});
    CHECK_THAT(invalid_argument_message([] { make_device_from_env(); }),
               Catch::Contains("DELTA_SIM_BACKING") && Catch::Contains("maybe"));
  }
  SECTION("DELTA_SIM_CONTENT") {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_CONTENT", "symbolic"}});
    CHECK_THAT(invalid_argument_message([] { make_device_from_env(); }),
               Catch::Contains("DELTA_SIM_CONTENT") && Catch::Contains("symbolic") &&
                   Catch::Contains("bytes, digest, none"));
  }
  SECTION("DELTA_SIM_BACKING=0 with content") {
    ScopedEnv env({{"DELTA_DEVICE", "sim"}, {"DELTA_SIM_BACKING", "0"}, {"DELTA_SIM_CONTENT", "digest"}});
    CHECK_THAT(invalid_argument_message([] { make_device_from_env(); }),
               Catch::Contains("DELTA_SIM_BACKING") && Catch::Contains("DELTA_SIM_CONTENT") && Catch::Contains("digest"));
  }
  SECTION("sim settings are checked even when cuda is chosen") {
    ScopedEnv env({{"DELTA_DEVICE", "cuda"}, {"DELTA_SIM_CAPACITY", "12 parsecs"}});
    CHECK_THAT(invalid_argument_message([] { make_device_from_env(); }), Catch::Contains("DELTA_SIM_CAPACITY"));
  }
}

TEST_CASE("auto picks cuda when it works and falls back to the sim otherwise", "[factory][env]") {
  const std::optional<DeviceErrc> failure = cuda_failure();
  for (const std::optional<std::string>& setting : {std::optional<std::string>{}, std::optional<std::string>{"auto"},
                                                     std::optional<std::string>{""}}) {
    ScopedEnv env({{"DELTA_DEVICE", setting}, {"DELTA_SIM_PROFILE", "titanv"}, {"DELTA_SIM_CAPACITY", "1GiB"}});
    auto device = make_device_from_env();
    if (!failure) {
      CHECK(device->kind() == "cuda");
    } else {
      REQUIRE((*failure == DeviceErrc::no_driver || *failure == DeviceErrc::no_device));
      REQUIRE(as_sim(device.get()) != nullptr);
      CHECK(as_sim(device.get())->profile().name == "titanv");
      CHECK(device->mem_info().total_bytes == kGiB);
    }
  }
}

TEST_CASE("DELTA_DEVICE=cuda never falls back to the sim", "[factory][env]") {
  ScopedEnv env({{"DELTA_DEVICE", "cuda"}});
  const std::optional<DeviceErrc> failure = cuda_failure();
  if (!failure) {
    CHECK(make_device_from_env()->kind() == "cuda");
  } else {
    try {
      make_device_from_env();
      FAIL("cuda was chosen and failed, yet a device came back");
    } catch (const DeviceError& error) {
      CHECK(error.code() == *failure);
    }
  }
}
