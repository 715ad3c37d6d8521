// libdelta.so as PyTorch's CUDAPluggableAllocator uses it: loaded with dlopen in a fresh
// process and driven only through its exported C functions.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Library {
  void* handle = nullptr;
  void* (*malloc_fn)(ssize_t, int, void*) = nullptr;
  void (*free_fn)(void*, ssize_t, int, void*) = nullptr;
  void (*record_stream)(void*, void*) = nullptr;
  void (*memory_fraction)(double, int) = nullptr;
  int (*stats_json)(char*, size_t) = nullptr;
  int (*dump)(const char*) = nullptr;
  int (*check)() = nullptr;
  int (*owns)(const void*) = nullptr;
  int (*empty_cache)() = nullptr;
  const char* (*last_error)() = nullptr;

  template <typename F>
  void bind(F& fn, const char* name) {
    fn = reinterpret_cast<F>(dlsym(handle, name));
    INFO(name);
    REQUIRE(fn != nullptr);
  }

  Library() {
    ::setenv("DELTA_DEVICE", "sim", 1);
    ::setenv("DELTA_SIM_CAPACITY", "1GiB", 1);
    ::setenv("DELTA_EVENT_LOG", "4096", 1);
    handle = dlopen(DELTA_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    INFO(dlerror());
    REQUIRE(handle != nullptr);
    bind(malloc_fn, "delta_malloc");
    bind(free_fn, "delta_free");
    bind(record_stream, "delta_record_stream");
    bind(memory_fraction, "delta_memory_fraction");
    bind(stats_json, "delta_stats_json");
    bind(dump, "delta_dump");
    bind(check, "delta_check_invariants");
    bind(owns, "delta_owns");
    bind(empty_cache, "delta_empty_cache");
    bind(last_error, "delta_last_error");
  }

  nlohmann::json stats() {
    int needed = stats_json(nullptr, 0);
    REQUIRE(needed > 0);
    std::string text(static_cast<std::size_t>(needed), '\0');
    REQUIRE(stats_json(text.data(), text.size()) == needed);
    text.resize(text.size() - 1);
    return nlohmann::json::parse(text);
  }
};

Library& lib() {
  static Library instance;
  return instance;
}

}  // namespace

TEST_CASE("only the C ABI and the CUDA runtime shims are exported") {
  Library& l = lib();
  CHECK(dlsym(l.handle, "_ZN5delta16CachingAllocator8allocateEmm") == nullptr);
}

TEST_CASE("delta_malloc and delta_free serve and cache memory") {
  Library& l = lib();
  std::vector<void*> blocks;
  for (ssize_t size : {1, 4096, 1 << 20, 3 << 20, 64 << 20}) {
    void* p = l.malloc_fn(size, 0, nullptr);
    REQUIRE(p != nullptr);
    CHECK(l.owns(p) == 1);
    blocks.push_back(p);
  }
  auto s = l.stats();
  CHECK(s["device"] == "sim");
  CHECK(s["alloc_count"] == 5);
  CHECK(s["allocated_bytes"].get<std::size_t>() >= (68u << 20) + 4097);
  for (void* p : blocks) l.free_fn(p, 0, 0, nullptr);
  CHECK(l.owns(blocks[0]) == 0);
  CHECK(l.check() == 0);
  auto maps = l.stats()["segment_maps"];
  void* again = l.malloc_fn(64 << 20, 0, nullptr);
  CHECK(l.stats()["segment_maps"] == maps);  // served from cached pages
  CHECK(l.stats()["cache_hits"].get<int>() >= 1);
  l.free_fn(again, 64 << 20, 0, nullptr);
  CHECK(l.empty_cache() == 0);
  CHECK(l.stats()["reserved_bytes"] == 0);
}

TEST_CASE("bad calls fail softly with a message and change nothing") {
  Library& l = lib();
  auto before = l.stats();
  CHECK(l.malloc_fn(-5, 0, nullptr) == nullptr);
  CHECK_THAT(l.last_error(), Catch::Contains("negative size"));
  CHECK(l.malloc_fn(16, 3, nullptr) == nullptr);
  CHECK_THAT(l.last_error(), Catch::Contains("device 3"));
  int local = 0;
  l.free_fn(&local, 4, 0, nullptr);  // a host pointer DELTA never gave out
  CHECK_THAT(l.last_error(), Catch::Contains("not a live DELTA allocation"));
  CHECK(l.malloc_fn(ssize_t(1) << 50, 0, nullptr) == nullptr);  // 1 PiB
  CHECK_THAT(l.last_error(), Catch::Contains("out of memory"));
  l.memory_fraction(7.0, 0);
  CHECK_THAT(l.last_error(), Catch::Contains("memory fraction"));
  l.memory_fraction(0.1, 1);  // another device's limit must not land on device 0
  CHECK_THAT(l.last_error(), Catch::Contains("device 1") && Catch::Contains("no limit changed"));
  CHECK(l.stats()["limit_bytes"] == before["limit_bytes"]);
  auto after = l.stats();
  CHECK(after["allocated_bytes"] == before["allocated_bytes"]);
  CHECK(after["alloc_count"] == before["alloc_count"]);
  CHECK(l.check() == 0);
}

TEST_CASE("delta_dump writes the history atomically as JSON") {
  Library& l = lib();
  void* p = l.malloc_fn(12345, 0, nullptr);
  std::string path = "/tmp/delta_dlopen_dump_" + std::to_string(::getpid()) + ".json";
  REQUIRE(l.dump(path.c_str()) == 0);
  std::ifstream in(path);
  auto doc = nlohmann::json::parse(in);
  CHECK(doc["format"] == "delta-allocator-dump");
  bool seen = false;
  for (auto& e : doc["events"]) seen |= e["kind"] == "alloc" && e["ptr"] == reinterpret_cast<std::uintptr_t>(p);
  CHECK(seen);
  CHECK(l.dump("") != 0);
  CHECK(l.dump("/nonexistent-dir/x.json") != 0);
  CHECK_THAT(l.last_error(), Catch::Contains("/nonexistent-dir/x.json"));
  std::remove(path.c_str());
  l.free_fn(p, 12345, 0, nullptr);
}
