// Fingerprints on a GPU: DELTA's own kernel (fingerprint_kernel.cu, shipped as PTX and loaded
// through the driver with cuModuleLoadData; no libcudart), one launch per range on the
// launch's stream, each adding into a 64-bit slot of a device buffer. drain() synchronises
// the context once, copies the slots back and hands them out: the learner drains when it concludes, so a
// learning iteration pays a kernel per range and one synchronisation per buffer of slots,
// never one per launch.
//
// It must be called where driver calls are legal: DELTA's interposed launch entry points,
// never a CUPTI callback (../shared/design.md, "Where CUDA may be called"). Record mode
// creates one on a GPU with learning iterations under LD_PRELOAD (record_session.cpp), driven
// by LaunchLearning from the launch wrappers; it has not run on a GPU yet.
#pragma once

#include "profiler/fingerprints/fingerprint.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace delta::profiler {

class CudaFingerprinter final : public Fingerprinter {
 public:
  // Resolves the driver entry points and loads the kernel into the current context. Throws
  // std::runtime_error naming what failed (no driver, no context, PTX refused).
  CudaFingerprinter();
  ~CudaFingerprinter() override;
  void submit(std::span<const FingerprintRange> ranges, std::uint64_t stream, std::uint64_t* out) override;
  void drain() override;

  static constexpr std::size_t kSlots = 1 << 16;  // per device buffer; a full buffer drains

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* module_ = nullptr;
  void* function_ = nullptr;
  std::uint64_t slots_ = 0;          // device buffer of kSlots 64-bit sums, zeroed
  std::uint64_t* host_ = nullptr;    // pinned, kSlots
  std::vector<std::uint64_t*> waiting_;  // where each used slot's value goes
};

}  // namespace delta::profiler
