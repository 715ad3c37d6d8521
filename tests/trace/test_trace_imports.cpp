// The importers' output on every real trace (written by test_trace_importers.py) must pass the
// C++ reader and validate(); gzip and plain copies must be the same trace. Also measures the
// reader and writer on the largest trace.
#include "trace_compare.hpp"

#include <delta/trace.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

using namespace delta::trace;
namespace fs = std::filesystem;

namespace {

std::map<std::string, fs::path> imported(const std::string& suffix) {
  std::map<std::string, fs::path> out;
  for (const auto& entry : fs::directory_iterator(DELTA_TRACE_IMPORTS_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out[name.substr(0, name.size() - suffix.size())] = entry.path();
    }
  }
  return out;
}

std::uint64_t peak_live(const Trace& trace) {
  std::vector<std::pair<std::int64_t, std::int64_t>> changes;
  std::int64_t live = 0;
  for (const Block& b : trace.blocks) {
    if (b.alloc_ns == kNever) live += static_cast<std::int64_t>(b.size);
    else changes.emplace_back(b.alloc_ns, static_cast<std::int64_t>(b.size));
    if (b.free_ns != kNever) changes.emplace_back(b.free_ns, -static_cast<std::int64_t>(b.size));
  }
  std::sort(changes.begin(), changes.end());
  std::int64_t peak = live;
  for (auto [t, change] : changes) peak = std::max(peak, live += change);
  return static_cast<std::uint64_t>(peak);
}

}  // namespace

TEST_CASE("every imported real trace reads back and validates") {
  const auto plain = imported(".json");
  const auto packed = imported(".json.gz");
  REQUIRE(plain.size() >= 7);  // 5 DTR logs, the snapshot, the execution trace
  REQUIRE(packed.size() == plain.size());
  for (const auto& [name, path] : plain) {
    INFO(name);
    const Trace trace = read_trace(path.string());
    CHECK(delta::trace::testing::same(trace, read_trace(packed.at(name).string())));
    CHECK_FALSE(trace.blocks.empty());
    if (trace.source == "dtr-log") {
      CHECK(trace.ops.size() > 100);
      CHECK(trace.iterations.size() == 1);
      CHECK(trace.gpu.profile == "titanv");
      bool backward = false;
      for (const Op& op : trace.ops) {
        CHECK_FALSE(op.duration_estimated);
        backward = backward || op.phase == Phase::backward;
      }
      CHECK(backward);
    } else if (trace.source == "pytorch-snapshot") {
      CHECK(trace.ops.empty());
      // The same figure as the recorded run's own peak of live requested bytes.
      CHECK(peak_live(trace) == std::stoull(trace.metadata.at("native_peak_allocated")));
    } else {
      CHECK(trace.source == "pytorch-et+kineto");
      CHECK(trace.ops.size() > 500);
      CHECK(std::stoi(trace.metadata.at("kineto_iterations_matched")) > 0);
    }
  }
}

TEST_CASE("reader and writer speed on the largest imported trace") {
  fs::path largest;
  for (const auto& [name, path] : imported(".json")) {
    if (largest.empty() || fs::file_size(path) > fs::file_size(largest)) largest = path;
  }
  REQUIRE_FALSE(largest.empty());
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  const Trace trace = read_trace(largest.string());
  const double read_s = std::chrono::duration<double>(clock::now() - t0).count();
  const fs::path out = fs::temp_directory_path() / "delta_trace_speed.json.gz";
  t0 = clock::now();
  write_trace(trace, out.string());
  const double write_gz_s = std::chrono::duration<double>(clock::now() - t0).count();
  t0 = clock::now();
  const Trace back = read_trace(out.string());
  const double read_gz_s = std::chrono::duration<double>(clock::now() - t0).count();
  fs::remove(out);
  CHECK(delta::trace::testing::same(trace, back));
  const double ops = static_cast<double>(std::max<std::size_t>(trace.ops.size(), 1));
  std::printf("%s: %zu ops, %zu blocks: read %.0f ops/s, read .gz %.0f ops/s, write .gz %.0f ops/s\n",
              largest.filename().c_str(), trace.ops.size(), trace.blocks.size(), ops / read_s, ops / read_gz_s,
              ops / write_gz_s);
}
