// A synthetic training step of a 3-layer MLP issued on the sim device: allocations through the
// caching allocator (reported to a record session as the src/ layer does), kernels with the
// ranges they read and write, copies for the batch and loss.item(), a memset. Forward and
// optimizer run on the calling thread, backward on a second thread, as PyTorch's autograd does.
// Every op it issues is also written down with the addresses it must be attributed to, so a
// test can hold the recorded trace against it.
#pragma once

#include "profiler/record_session.hpp"

#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>
#include <delta/trace.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace delta::test {

struct ExpectedOp {
  std::string name;
  trace::OpKind kind;
  trace::Phase phase;
  std::uint32_t iteration;
  std::vector<std::pair<DevicePtr, trace::Access>> uses;  // block start address, access
};

class MlpHarness {
 public:
  MlpHarness(CachingAllocator& allocator, SimDevice& device, profiler::RecordSession& session);
  ~MlpHarness();

  // One training step; `mark_step` calls session.step() at its end (delta_step()).
  void step(bool mark_step);
  // Frees the parameters and optimizer state.
  void release();

  const std::vector<ExpectedOp>& expected() const { return expected_; }
  // Kernels from now on are opaque (they show only their parameter bytes) and deterministic
  // functions of their inputs, so that what they write shows in memory.
  void set_opaque(bool opaque) { opaque_ = opaque; }

 private:
  struct Tensor {
    DevicePtr ptr = 0;
    std::size_t bytes = 0;
  };
  Tensor alloc(std::size_t bytes);
  void free(Tensor& tensor);
  void kernel(const std::string& name, std::vector<Tensor> reads, std::vector<Tensor> writes, trace::Phase phase);
  void forward();
  void backward();
  void optimizer();

  CachingAllocator& allocator_;
  SimDevice& device_;
  profiler::RecordSession& session_;
  std::uint32_t iteration_ = 0;
  std::vector<ExpectedOp> expected_;
  std::vector<std::uint8_t> host_batch_, host_loss_;

  static constexpr int kLayers = 3;
  Tensor weight_[kLayers], bias_[kLayers], momentum_w_[kLayers], momentum_b_[kLayers];
  Tensor grad_w_[kLayers], grad_b_[kLayers];
  Tensor input_, target_, pre_[kLayers], act_[kLayers], loss_;
  bool momentum_ready_ = false;
  bool opaque_ = false;
};

}  // namespace delta::test
