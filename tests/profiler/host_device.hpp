// Host memory standing in for a GPU, for the launch-learning tests: a fingerprinter that
// hashes bytes when asked (work on a stream runs at once) and a stager that copies with
// memcpy; both log what they did, in order.
#pragma once

#include "profiler/fingerprints/fingerprint.hpp"
#include "profiler/directions/launch_learning.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace delta::profiler::testing {

// What happened, in order: "fp <addr>", "copy <dst>", "run <kernel>", "replay <kernel>".
struct Log {
  std::vector<std::string> events;
  void add(std::string e) { events.push_back(std::move(e)); }
};

inline std::uint64_t hash_bytes(std::uint64_t address, std::uint64_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(address);
  for (std::uint64_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

class HostFingerprinter final : public Fingerprinter {
 public:
  explicit HostFingerprinter(Log& log) : log_(log) {}
  void submit(std::span<const FingerprintRange> ranges, std::uint64_t, std::uint64_t* out) override {
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      out[i] = hash_bytes(ranges[i].address, ranges[i].bytes);
      log_.add("fp " + std::to_string(ranges[i].address));
    }
  }
  void drain() override {}

 private:
  Log& log_;
};

class HostStager final : public CopyStager {
 public:
  explicit HostStager(Log& log) : log_(log) {}
  std::uint64_t allocate(std::size_t bytes, std::uint64_t) override {
    if (refuse) return 0;
    auto buffer = std::make_unique<std::byte[]>(bytes);
    const auto address = reinterpret_cast<std::uint64_t>(buffer.get());
    live.emplace(address, std::make_pair(std::move(buffer), bytes));
    ++allocations;
    return address;
  }
  void copy(std::uint64_t dst, std::uint64_t src, std::size_t bytes, std::uint64_t) override {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    log_.add("copy " + std::to_string(dst));
  }
  void release(std::uint64_t address, std::size_t bytes, std::uint64_t) override {
    REQUIRE(live.count(address) == 1);
    REQUIRE(live.at(address).second == bytes);
    live.erase(address);
  }
  bool inside(std::uint64_t address) const {
    for (const auto& [base, held] : live)
      if (address >= base && address < base + held.second) return true;
    return false;
  }
  std::map<std::uint64_t, std::pair<std::unique_ptr<std::byte[]>, std::size_t>> live;
  bool refuse = false;
  int allocations = 0;

 private:
  Log& log_;
};

}  // namespace delta::profiler::testing
