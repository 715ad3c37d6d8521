// The cuda device where it cannot work: no libcuda.so.1 (this build machine), or the toolkit's
// stub library in its place (DELTA_EXPECT_STUB_DRIVER=1, set by the ctest entry that puts the
// stub first on LD_LIBRARY_PATH). Either way make_cuda_device must throw a DeviceError with a
// precise code and a message that tells the user what is wrong, and never crash.
// On a machine with a working driver the same file checks that the device opens.
#include <delta/device.hpp>

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Attempt {
  bool opened = false;
  delta::DeviceErrc code = delta::DeviceErrc::driver_error;
  std::string message;
};

Attempt try_open(int ordinal) {
  Attempt attempt;
  try {
    auto device = delta::make_cuda_device(ordinal);
    attempt.opened = device != nullptr && device->kind() == "cuda" && device->ordinal() == ordinal;
  } catch (const delta::DeviceError& error) {
    attempt.code = error.code();
    attempt.message = error.what();
  }
  return attempt;
}

bool expect_stub() {
  const char* value = std::getenv("DELTA_EXPECT_STUB_DRIVER");
  return value != nullptr && std::string(value) == "1";
}

// What the dynamic loader says about libcuda.so.1 in this process, independently of DELTA.
std::string loader_verdict() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return "";
  const char* why = dlerror();
  return why ? why : "unknown";
}

// The stub test's setup holds: the first LD_LIBRARY_PATH entry has a libcuda.so.1 that resolves
// (the link ctest made points into the toolkit of the machine that configured the build, which
// a build carried to another machine may not have).
bool stub_in_front() {
  const char* path = std::getenv("LD_LIBRARY_PATH");
  if (path == nullptr) return false;
  const std::string first = std::string(path).substr(0, std::string(path).find(':'));
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(first) / "libcuda.so.1", ec);
}

// The exit status of a run with nothing to check (tests/gpu/CMakeLists.txt: SKIP_RETURN_CODE).
constexpr int kSkipped = 77;

}  // namespace

TEST_CASE("make_cuda_device reports a missing or unusable driver precisely") {
  const Attempt first = try_open(0);
  const std::string dlopen_error = loader_verdict();

  if (expect_stub() && !stub_in_front()) {
    // ctest reports the exit status as "Skipped" (SKIP_RETURN_CODE), not as a pass.
    std::fprintf(stderr, "DELTA_EXPECT_STUB_DRIVER=1 but no stub libcuda.so.1 resolves at the front of "
                         "LD_LIBRARY_PATH: skipped\n");
    std::exit(kSkipped);
  } else if (expect_stub()) {
    INFO(first.message);
    REQUIRE_FALSE(first.opened);
    CHECK(first.code == delta::DeviceErrc::no_driver);
    CHECK(first.message.find("CUDA_ERROR_STUB_LIBRARY") != std::string::npos);
  } else if (!dlopen_error.empty()) {
    INFO(first.message);
    REQUIRE_FALSE(first.opened);
    CHECK(first.code == delta::DeviceErrc::no_driver);
    CHECK(first.message.find("libcuda.so.1") != std::string::npos);
    CHECK(first.message.find("could not be loaded") != std::string::npos);
    // The loader's own reason is passed on, not paraphrased away.
    CHECK(first.message.find(dlopen_error) != std::string::npos);
  } else {
    // A driver library is loadable here: the device opens, or says there is no device.
    INFO(first.message);
    CHECK((first.opened || first.code == delta::DeviceErrc::no_device ||
           first.code == delta::DeviceErrc::no_driver));
    if (!first.opened) CHECK_FALSE(first.message.empty());
  }
}

TEST_CASE("the outcome is stable across calls and threads") {
  const Attempt reference = try_open(0);
  std::vector<Attempt> seen(8);
  std::vector<std::thread> threads;
  for (auto& slot : seen) threads.emplace_back([&slot] { slot = try_open(0); });
  for (auto& thread : threads) thread.join();
  for (const Attempt& attempt : seen) {
    CHECK(attempt.opened == reference.opened);
    CHECK(attempt.code == reference.code);
    CHECK(attempt.message == reference.message);
  }
}

TEST_CASE("a bad ordinal is refused, never crashes") {
  for (int ordinal : {-1, 4096}) {
    const Attempt attempt = try_open(ordinal);
    INFO("ordinal " << ordinal << ": " << attempt.message);
    CHECK_FALSE(attempt.opened);
    CHECK((attempt.code == delta::DeviceErrc::no_device ||
           attempt.code == delta::DeviceErrc::no_driver));
    CHECK_FALSE(attempt.message.empty());
    if (attempt.code == delta::DeviceErrc::no_device && loader_verdict().empty() && !expect_stub()) {
      CHECK(attempt.message.find(std::to_string(ordinal)) != std::string::npos);
    }
  }
}
