// A program's structure as its entry points see it, without times: the sizes it allocates,
// the kernels it launches and how many ranges each touches, its frees, in order. Two runs of
// the same training loop give the same key; another model, batch size or code path does not.
// What a plan cache is keyed by (with the GPU, the budget and DELTA's version).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace delta::autopilot {

class StepKey {
 public:
  void allocation(std::size_t size) { add('a', size); }
  void free() { add('f', 0); }
  void launch(std::string_view name, std::size_t ranges);
  void text(std::string_view text);  // anything else the key must tell apart (the GPU, a version)
  std::uint64_t value() const { return state_; }
  std::string hex() const;  // 16 hex digits

 private:
  void add(char tag, std::uint64_t value);
  std::uint64_t state_ = 1469598103934665603ull;  // FNV-1a
};

}  // namespace delta::autopilot
