// The replays' copies on a GPU: stream-ordered scratch memory (cuMemAllocAsync /
// cuMemFreeAsync, from the device's default pool, outside DELTA's allocator, so the recorder
// never sees them as blocks) and device-to-device copies on the launch's stream, through the
// real driver entry points. Used by LaunchLearning inside DELTA's launch wrappers, where
// driver calls are legal. Compiled here, run only on a GPU.
#pragma once

#include "profiler/directions/launch_learning.hpp"

#include <memory>

namespace delta::profiler {

class CudaCopyStager final : public CopyStager {
 public:
  // Throws std::runtime_error naming the entry point the driver lacks.
  CudaCopyStager();
  ~CudaCopyStager() override;
  std::uint64_t allocate(std::size_t bytes, std::uint64_t stream) override;
  void copy(std::uint64_t dst, std::uint64_t src, std::size_t bytes, std::uint64_t stream) override;
  void release(std::uint64_t address, std::size_t bytes, std::uint64_t stream) override;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
};

}  // namespace delta::profiler
