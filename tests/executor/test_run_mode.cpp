// DELTA_MODE=run through libdelta's C ABI, as a job would enter it: each case in a fresh
// process (the runtime is made once per process from the environment), loaded with dlopen.
#include "executor_fixtures.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

namespace {

using namespace delta;
namespace fs = std::filesystem;

struct Abi {
  void* handle = nullptr;
  void* (*malloc_fn)(ssize_t, int, void*) = nullptr;
  void (*free_fn)(void*, ssize_t, int, void*) = nullptr;
  int (*stats_json)(char*, size_t) = nullptr;
  int (*step)() = nullptr;
  const char* (*last_error)() = nullptr;
};

// Runs `body` in a child process with the library loaded; the child's exit code is the result
// and what it writes to the pipe is the message.
std::pair<int, std::string> in_child(const std::function<int(Abi&, std::string&)>& body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    std::string message;
    Abi abi;
    abi.handle = dlopen(DELTA_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    int code = 90;
    if (abi.handle) {
      abi.malloc_fn = reinterpret_cast<decltype(abi.malloc_fn)>(dlsym(abi.handle, "delta_malloc"));
      abi.free_fn = reinterpret_cast<decltype(abi.free_fn)>(dlsym(abi.handle, "delta_free"));
      abi.stats_json = reinterpret_cast<decltype(abi.stats_json)>(dlsym(abi.handle, "delta_stats_json"));
      abi.step = reinterpret_cast<decltype(abi.step)>(dlsym(abi.handle, "delta_step"));
      abi.last_error = reinterpret_cast<decltype(abi.last_error)>(dlsym(abi.handle, "delta_last_error"));
      code = body(abi, message);
    } else {
      message = dlerror();
    }
    if (!message.empty()) (void)!write(fds[1], message.data(), message.size());
    close(fds[1]);
    _exit(code);
  }
  close(fds[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) message.append(buffer, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 99, message};
}

std::string stats(Abi& abi) {
  const int needed = abi.stats_json(nullptr, 0);
  std::string text(static_cast<std::size_t>(needed > 0 ? needed : 1), '\0');
  abi.stats_json(text.data(), text.size());
  text.resize(text.size() - 1);
  return text;
}

struct Files {
  fs::path dir = fs::temp_directory_path() / ("delta_run_mode_" + std::to_string(getpid()));
  fs::path trace = dir / "trace.json", plan = dir / "plan.json", other = dir / "other.json";
  Files() {
    fs::create_directories(dir);
    const trace::Trace t = planner::testing::swap_trace();
    trace::write_trace(t, trace.string());
    plan::Plan p = executor::testing::plan_for(t, 1'250'000'000);
    executor::testing::add(p, 1, executor::testing::swap(0, 3, 4));
    plan::write_plan(p, plan.string());
    plan::write_plan(executor::testing::plan_for(planner::testing::concat_trace(), 1'250'000'000), other.string());
  }
  ~Files() { fs::remove_all(dir); }
};

void run_mode_env(const Files& files, const fs::path& plan) {
  ::setenv("DELTA_DEVICE", "sim", 1);
  ::setenv("DELTA_SIM_PROFILE", "titanv", 1);
  ::setenv("DELTA_SIM_CONTENT", "digest", 1);
  ::setenv("DELTA_MODE", "run", 1);
  ::setenv("DELTA_TRACE", files.trace.c_str(), 1);
  ::setenv("DELTA_PLAN", plan.c_str(), 1);
}

}  // namespace

TEST_CASE("run mode without a plan is refused, naming DELTA_PLAN", "[executor][run-mode]") {
  const auto [code, message] = in_child([](Abi& abi, std::string& out) {
    ::setenv("DELTA_DEVICE", "sim", 1);
    ::setenv("DELTA_MODE", "run", 1);
    ::unsetenv("DELTA_PLAN");
    void* p = abi.malloc_fn(4096, 0, nullptr);
    out = abi.last_error();
    return p == nullptr ? 0 : 1;
  });
  CHECK(code == 0);
  CHECK_THAT(message, Catch::Contains("DELTA_PLAN"));
}

TEST_CASE("run mode refuses a plan made for another trace", "[executor][run-mode]") {
  const Files files;
  const auto [code, message] = in_child([&](Abi& abi, std::string& out) {
    run_mode_env(files, files.other);
    void* p = abi.malloc_fn(4096, 0, nullptr);
    out = abi.last_error();
    return p == nullptr ? 0 : 1;
  });
  CHECK(code == 0);
  CHECK_THAT(message, Catch::Contains("trace"));
}

TEST_CASE("run mode checks DELTA_HOST_BUDGET: malformed, or too small for the plan's copies", "[executor][run-mode]") {
  const Files files;
  for (const auto& [value, expected] : {std::pair<const char*, const char*>{"lots", "DELTA_HOST_BUDGET='lots'"},
                                        {"-1", "DELTA_HOST_BUDGET='-1'"},  // not wrapped to 2^64 - 1, unlimited
                                        {"4096", "pinned host memory"}}) {
    const auto [code, message] = in_child([&, value = value](Abi& abi, std::string& out) {
      run_mode_env(files, files.plan);
      ::setenv("DELTA_HOST_BUDGET", value, 1);
      void* p = abi.malloc_fn(4096, 0, nullptr);
      out = abi.last_error();
      return p == nullptr ? 0 : 1;
    });
    CHECK(code == 0);
    CHECK_THAT(message, Catch::Contains(expected));
  }
}

TEST_CASE("run mode serves the plan's allocations and counts a program that strays", "[executor][run-mode]") {
  const Files files;
  const auto [code, message] = in_child([&](Abi& abi, std::string& out) {
    run_mode_env(files, files.plan);
    void* x = abi.malloc_fn(static_cast<ssize_t>(planner::testing::kX), 0, nullptr);  // block 1, as planned
    if (!x) {
      out = abi.last_error();
      return 2;
    }
    void* stray = abi.malloc_fn(12345, 0, nullptr);  // the step allocates nothing of this size now
    abi.free_fn(stray, 12345, 0, nullptr);
    out = stats(abi);
    abi.step();
    return 0;
  });
  REQUIRE(code == 0);
  const nlohmann::json j = nlohmann::json::parse(message);
  REQUIRE(j.contains("executor"));
  CHECK(j["executor"]["divergences"] == 1);
  CHECK_THAT(j["executor"]["last_divergence"].get<std::string>(), Catch::Contains("12345 bytes"));
}

// DELTA_MODE=auto: a budget and nothing else. On the sim it serves every allocation through
// the online policy from the first one; bad settings are refused by name.
TEST_CASE("auto mode checks DELTA_BUDGET and serves allocations within it on the sim", "[executor][auto-mode]") {
  for (const auto& [value, expected] : {std::pair<const char*, const char*>{"", "needs DELTA_BUDGET"},
                                        {"lots", "DELTA_BUDGET='lots'"},
                                        {"1.5", "a fraction above 1"},
                                        {"64", "under a MiB"},
                                        {"99TiB", "more than the device's"}}) {
    const auto [code, message] = in_child([&, value = value](Abi& abi, std::string& out) {
      ::setenv("DELTA_DEVICE", "sim", 1);
      ::setenv("DELTA_MODE", "auto", 1);
      ::setenv("DELTA_BUDGET", value, 1);
      void* p = abi.malloc_fn(4096, 0, nullptr);
      out = abi.last_error();
      return p == nullptr ? 0 : 1;
    });
    CHECK(code == 0);
    CHECK_THAT(message, Catch::Contains(expected));
  }
  const auto [code, message] = in_child([&](Abi& abi, std::string& out) {
    ::setenv("DELTA_DEVICE", "sim", 1);
    ::setenv("DELTA_SIM_PROFILE", "titanv", 1);
    ::setenv("DELTA_MODE", "auto", 1);
    ::setenv("DELTA_BUDGET", "8MiB", 1);
    ::setenv("DELTA_PLAN_CACHE", "off", 1);
    // Six blocks of 2 MiB under a budget of four: the online policy evicts, nothing fails.
    std::vector<void*> blocks;
    for (int i = 0; i < 6; ++i) {
      void* p = abi.malloc_fn(2 << 20, 0, nullptr);
      if (!p) {
        out = abi.last_error();
        return 2;
      }
      blocks.push_back(p);
    }
    for (void* p : blocks) abi.free_fn(p, 2 << 20, 0, nullptr);
    abi.step();
    out = stats(abi);
    return 0;
  });
  REQUIRE(code == 0);
  const nlohmann::json j = nlohmann::json::parse(message);
  CHECK(j["executor"]["mode"] == "auto");
  CHECK(j["executor"]["online"]["evictions"].get<int>() >= 2);
  CHECK(j["executor"]["online"]["budget_exceeded"].get<int>() == 0);
}
