#include "mlp_step.hpp"

#include <algorithm>
#include <functional>

#include <thread>

namespace delta::test {
namespace {

constexpr std::size_t kBatch = 64, kIn = 256, kHidden = 512, kOut = 10, kFloat = 4;
constexpr std::size_t kWidths[4] = {kIn, kHidden, kHidden, kOut};
constexpr StreamHandle kStream = 0;

}  // namespace

MlpHarness::MlpHarness(CachingAllocator& allocator, SimDevice& device, profiler::RecordSession& session)
    : allocator_(allocator), device_(device), session_(session) {
  host_batch_.resize(kBatch * kIn * kFloat, 1);
  host_loss_.resize(kFloat, 0);
  for (int l = 0; l < kLayers; ++l) {
    weight_[l] = alloc(kWidths[l] * kWidths[l + 1] * kFloat);
    bias_[l] = alloc(kWidths[l + 1] * kFloat);
  }
}

MlpHarness::~MlpHarness() = default;

MlpHarness::Tensor MlpHarness::alloc(std::size_t bytes) {
  Tensor t{reinterpret_cast<DevicePtr>(allocator_.allocate(bytes, kStream)), bytes};
  session_.on_alloc(t.ptr, bytes, kStream);
  return t;
}

void MlpHarness::free(Tensor& tensor) {
  if (tensor.ptr == 0) return;
  session_.on_free(tensor.ptr);
  allocator_.deallocate(reinterpret_cast<void*>(tensor.ptr));
  tensor = {};
}

void MlpHarness::kernel(const std::string& name, std::vector<Tensor> reads, std::vector<Tensor> writes,
                        trace::Phase phase) {
  SimLaunch launch;
  launch.name = name;
  launch.duration_ns = 10'000;
  ExpectedOp op{name, trace::OpKind::kernel, phase, iteration_, {}};
  // Interior pointers: kernels are given a range starting inside the block (a view), which
  // must still name the block.
  for (const Tensor& t : reads) {
    if (t.bytes > kFloat) launch.reads.push_back({t.ptr + kFloat, t.bytes - kFloat});
    else launch.reads.push_back({t.ptr, t.bytes});
    op.uses.emplace_back(t.ptr, trace::Access::read);
  }
  for (const Tensor& t : writes) {
    launch.writes.push_back({t.ptr, t.bytes});
    op.uses.emplace_back(t.ptr, trace::Access::write);
  }
  expected_.push_back(std::move(op));
  if (opaque_) {
    launch.seed = std::hash<std::string>{}(name) | 1;
    std::vector<DevicePtr> pointers;
    for (const SimRange& range : launch.reads) pointers.push_back(range.ptr);
    for (const SimRange& range : launch.writes)
      if (std::find(pointers.begin(), pointers.end(), range.ptr) == pointers.end()) pointers.push_back(range.ptr);
    launch.params = sim_pack_params(pointers, kBatch);
  }
  device_.launch(launch, kStream);
}

void MlpHarness::forward() {
  input_ = alloc(kBatch * kIn * kFloat);
  device_.copy_h2d_async(input_.ptr, host_batch_.data(), input_.bytes, kStream);
  expected_.push_back({"h2d", trace::OpKind::copy_h2d, trace::Phase::forward, iteration_, {{input_.ptr, trace::Access::write}}});
  target_ = alloc(kBatch * kOut * kFloat);
  device_.memset_async(target_.ptr, 0, target_.bytes, kStream);
  expected_.push_back({"memset", trace::OpKind::memset, trace::Phase::forward, iteration_, {{target_.ptr, trace::Access::write}}});

  Tensor in = input_;
  for (int l = 0; l < kLayers; ++l) {
    pre_[l] = alloc(kBatch * kWidths[l + 1] * kFloat);
    kernel("linear" + std::to_string(l), {in, weight_[l], bias_[l]}, {pre_[l]}, trace::Phase::forward);
    act_[l] = alloc(pre_[l].bytes);
    kernel("relu" + std::to_string(l), {pre_[l]}, {act_[l]}, trace::Phase::forward);
    in = act_[l];
  }
  loss_ = alloc(kFloat);
  kernel("cross_entropy", {act_[kLayers - 1], target_}, {loss_}, trace::Phase::forward);
}

void MlpHarness::backward() {
  Tensor grad = alloc(act_[kLayers - 1].bytes);
  kernel("cross_entropy_backward", {act_[kLayers - 1], target_, loss_}, {grad}, trace::Phase::backward);
  for (int l = kLayers - 1; l >= 0; --l) {
    Tensor grad_pre = alloc(pre_[l].bytes);
    kernel("relu_backward" + std::to_string(l), {grad, pre_[l]}, {grad_pre}, trace::Phase::backward);
    free(grad);
    free(act_[l]);
    Tensor layer_input = l == 0 ? input_ : act_[l - 1];
    grad_w_[l] = alloc(weight_[l].bytes);
    grad_b_[l] = alloc(bias_[l].bytes);
    kernel("linear_backward_weight" + std::to_string(l), {grad_pre, layer_input}, {grad_w_[l], grad_b_[l]},
           trace::Phase::backward);
    if (l > 0) {
      grad = alloc(act_[l - 1].bytes);
      kernel("linear_backward_input" + std::to_string(l), {grad_pre, weight_[l]}, {grad}, trace::Phase::backward);
    }
    free(grad_pre);
    free(pre_[l]);
  }
}

void MlpHarness::optimizer() {
  if (!momentum_ready_) {
    for (int l = 0; l < kLayers; ++l) {
      momentum_w_[l] = alloc(weight_[l].bytes);
      momentum_b_[l] = alloc(bias_[l].bytes);
    }
    momentum_ready_ = true;
  }
  for (int l = 0; l < kLayers; ++l) {
    kernel("sgd_momentum", {weight_[l], grad_w_[l], momentum_w_[l]}, {weight_[l], momentum_w_[l]}, trace::Phase::optimizer);
    kernel("sgd_momentum", {bias_[l], grad_b_[l], momentum_b_[l]}, {bias_[l], momentum_b_[l]}, trace::Phase::optimizer);
  }
  device_.copy_d2h_async(host_loss_.data(), loss_.ptr, loss_.bytes, kStream);
  expected_.push_back({"d2h", trace::OpKind::copy_d2h, trace::Phase::optimizer, iteration_, {{loss_.ptr, trace::Access::read}}});
  for (int l = 0; l < kLayers; ++l) {  // zero_grad(set_to_none=True)
    free(grad_w_[l]);
    free(grad_b_[l]);
  }
  free(input_);
  free(target_);
  free(loss_);
}

void MlpHarness::step(bool mark_step) {
  forward();
  // PyTorch runs backward on its autograd device thread; so does this step.
  std::thread autograd([this] { backward(); });
  autograd.join();
  optimizer();
  if (mark_step) session_.step();
  ++iteration_;
}

void MlpHarness::release() {
  for (int l = 0; l < kLayers; ++l) {
    free(weight_[l]);
    free(bias_[l]);
    free(momentum_w_[l]);
    free(momentum_b_[l]);
  }
}

}  // namespace delta::test
