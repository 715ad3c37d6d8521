// DELTA_MODE=record through libdelta.so's C ABI on the sim device: the settings are read when
// the allocator is created, bad ones fail the first allocation with the variable's name, and
// the trace goes to the rank-tagged DELTA_TRACE path.
#include <delta/trace.hpp>

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Abi {
  void* handle = nullptr;
  void* (*malloc_)(ssize_t, int, void*) = nullptr;
  void (*free_)(void*, ssize_t, int, void*) = nullptr;
  int (*step)() = nullptr;
  int (*dump)(const char*) = nullptr;
  const char* (*last_error)() = nullptr;

  Abi() {
    handle = dlopen(DELTA_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle != nullptr);
    malloc_ = reinterpret_cast<decltype(malloc_)>(dlsym(handle, "delta_malloc"));
    free_ = reinterpret_cast<decltype(free_)>(dlsym(handle, "delta_free"));
    step = reinterpret_cast<decltype(step)>(dlsym(handle, "delta_step"));
    dump = reinterpret_cast<decltype(dump)>(dlsym(handle, "delta_trace_dump"));
    last_error = reinterpret_cast<decltype(last_error)>(dlsym(handle, "delta_last_error"));
    REQUIRE(malloc_);
    REQUIRE(free_);
    REQUIRE(step);
    REQUIRE(dump);
    REQUIRE(last_error);
  }
};

std::string failure_of(Abi& abi) {
  void* p = abi.malloc_(1024, 0, nullptr);
  if (p != nullptr) {
    abi.free_(p, 1024, 0, nullptr);
    return "";
  }
  return abi.last_error();
}

}  // namespace

TEST_CASE("record mode through the C ABI: bad settings are named, the trace is written per rank") {
  const fs::path dir = fs::temp_directory_path() / "delta_record_abi";
  fs::remove_all(dir);
  fs::create_directories(dir);
  setenv("DELTA_DEVICE", "sim", 1);
  setenv("DELTA_TRACE", (dir / "trace.json").c_str(), 1);
  unsetenv("LOCAL_RANK");

  Abi abi;
  CHECK(abi.step() == 0);  // nothing recorded yet: a harmless no-op

  setenv("DELTA_MODE", "recording", 1);
  CHECK(failure_of(abi).find("DELTA_MODE='recording'") != std::string::npos);
  setenv("DELTA_MODE", "record", 1);
  setenv("DELTA_RECORD_ITERATIONS", "zero", 1);
  CHECK(failure_of(abi).find("DELTA_RECORD_ITERATIONS='zero'") != std::string::npos);
  setenv("DELTA_RECORD_ITERATIONS", "3", 1);
  setenv("RANK", "rank-one", 1);
  CHECK(failure_of(abi).find("RANK='rank-one'") != std::string::npos);
  setenv("RANK", "1", 1);

  CHECK(abi.dump(nullptr) == -1);  // still nothing recorded
  CHECK(std::string(abi.last_error()).find("nothing is being recorded") != std::string::npos);

  void* a = abi.malloc_(4096, 0, nullptr);
  REQUIRE(a != nullptr);
  void* b = abi.malloc_(1 << 20, 0, nullptr);
  REQUIRE(b != nullptr);
  abi.free_(a, 4096, 0, nullptr);
  CHECK(abi.step() == 0);
  CHECK(abi.dump("") == -1);
  REQUIRE(abi.dump(nullptr) == 0);

  const fs::path written = dir / "trace.rank1.json";
  REQUIRE(fs::exists(written));
  CHECK_FALSE(fs::exists(dir / "trace.json"));
  const auto recorded = delta::trace::read_trace(written.string());
  REQUIRE(recorded.blocks.size() == 2);
  CHECK(recorded.blocks[0].address == reinterpret_cast<std::uint64_t>(a));
  CHECK(recorded.blocks[0].size == 4096);
  CHECK(recorded.blocks[0].free_ns != delta::trace::kNever);
  CHECK(recorded.blocks[1].size == (1u << 20));
  CHECK(recorded.blocks[1].free_ns == delta::trace::kNever);
  CHECK(recorded.allocator_settings.count("limit_bytes") == 1);
  abi.free_(b, 1 << 20, 0, nullptr);
  fs::remove_all(dir);
}
