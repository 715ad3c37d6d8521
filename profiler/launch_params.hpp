// A driver launch's parameters as DELTA reads, copies and patches them: the packed buffer a
// kernel sees, whether it came as kernelParams (laid out by cuFuncGetParamInfo) or as the
// `extra` buffer, and a copy of it whose pointer words name other addresses, ready to be
// passed to the driver again. Shared by the executor's launch route (replays for
// regenerations) and the recorder's direction learning (replays on copies).
#pragma once

#include "profiler/directions/param_scan.hpp"

#include <delta/device.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace delta::profiler {

// Where a launch's parameters are.
struct ParamSource {
  const ParamLayout* layout = nullptr;  // for kernel_params; nullptr when the driver could not say
  void** kernel_params = nullptr;
  void** extra = nullptr;  // CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END pairs
};

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

}  // namespace delta::profiler
