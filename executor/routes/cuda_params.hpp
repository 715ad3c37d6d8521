// A driver launch's parameters as the GPU launch route reads, copies and patches them.
//
// The driver takes parameters two ways: kernelParams (params[i] points to the value of
// parameter i, laid out by the offsets and sizes cuFuncGetParamInfo reports) or `extra` with
// CU_LAUNCH_PARAM_BUFFER_POINTER (one packed buffer, laid out already). Either way the kernel
// sees one packed buffer, and a pointer can sit at any 8-aligned offset of it: a parameter of
// its own, or a field of a struct passed by value. Every such word that points into a block
// the executor keeps state for becomes a LaunchRange (a touch: offsets and sizes say nothing
// of direction), remembered with its offset so that a replay can put another address there.
// Words that point nowhere DELTA manages are never changed.
#pragma once

#include "executor/launch.hpp"
#include "profiler/param_scan.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace delta::executor {

using profiler::ParamLayout;

// Where a launch's parameters are.
struct ParamSource {
  const ParamLayout* layout = nullptr;  // for kernel_params; nullptr when the driver could not say
  void** kernel_params = nullptr;
  void** extra = nullptr;  // CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END pairs
};

// The block containing an address, as [start, start + size); nullopt when DELTA does not
// manage one there.
using BlockLookup = std::function<std::optional<std::pair<DevicePtr, std::size_t>>(DevicePtr)>;

struct FoundPointers {
  std::vector<LaunchRange> ranges;   // ptr: the word's value; bytes: from there to the block's end
  std::vector<std::size_t> offsets;  // per range, the word's offset in the packed buffer
};

// false when the parameters cannot be read: kernel_params without a layout, or neither form.
// A launch with no parameters at all (both null) reads as true with nothing found.
bool find_block_pointers(const ParamSource& source, const BlockLookup& lookup, FoundPointers& out);

// A copy of a launch's parameters: the packed buffer (padding zeroed), and the form it came in.
struct ParamCopy {
  std::vector<std::byte> bytes;
  ParamLayout layout;      // the kernel_params form; empty for `extra`
  bool via_extra = false;
  std::vector<std::size_t> pointer_offsets;  // where Relaunch's ptrs go, in range order
};

// nullopt when the parameters cannot be read (as find_block_pointers). Throws
// std::invalid_argument naming the offset when one lies outside the packed buffer.
std::optional<ParamCopy> copy_params(const ParamSource& source, std::vector<std::size_t> pointer_offsets);

// A copy with other addresses in its pointer words, ready to pass to the driver again. Each
// word keeps its distance from its range's start: ptrs[i] replaces ranges[i].ptr exactly, so
// interior pointers stay interior.
class PatchedParams {
 public:
  // Throws std::invalid_argument when ptrs has another length than the copy's pointer words.
  PatchedParams(const ParamCopy& copy, std::span<const DevicePtr> ptrs);
  PatchedParams(const PatchedParams&) = delete;
  PatchedParams& operator=(const PatchedParams&) = delete;

  void** kernel_params() { return via_extra_ ? nullptr : args_.data(); }
  void** extra() { return via_extra_ ? extra_ : nullptr; }
  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
  std::vector<void*> args_;
  std::size_t size_ = 0;
  bool via_extra_ = false;
  void* extra_[5] = {};
};

}  // namespace delta::executor
