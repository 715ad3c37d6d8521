// A fake CUDA driver over the sim device, for tests that drive the GPU launch route
// (executor/routes/cuda_route.hpp) with whatever sits behind it: the online policy, auto mode.
// A kernel's parameters are (pointer, bytes) word pairs; the driver's "real" launch reads them
// back from the bytes it is given (so a patched replay lands where its words point), notes any
// range not mapped at that moment, and issues a sim kernel reading or writing those ranges on
// the stream it was given. Header-only: the route takes plain function pointers, so the driver
// in use is one global (one test at a time, as Catch runs them).
#pragma once

#include "executor/routes/cuda_route.hpp"

#include <delta/sim_device.hpp>

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace delta::executor::testing {

struct FakeKernel {
  std::string name;
  std::uint64_t duration_ns = 1000;
  std::vector<bool> writes;  // per (pointer, bytes) pair: written (else read)
};

struct FakeArg {
  DevicePtr ptr = 0;
  std::uint64_t bytes = 0;
};

class FakeDriver {
 public:
  explicit FakeDriver(SimDevice& sim) : sim_(sim) {
    if (current_ != nullptr) throw std::logic_error("FakeDriver: one at a time");
    current_ = this;
  }
  ~FakeDriver() { current_ = nullptr; }
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;

  // Its handle: the kernel's index plus one (never null).
  CUfunction add(FakeKernel kernel) {
    kernels_.push_back(std::move(kernel));
    return reinterpret_cast<CUfunction>(kernels_.size());
  }

  static FunctionQueries queries() {
    FunctionQueries q;
    q.func_get_param_info = &param_info;
    q.func_get_name = &name;
    q.func_get_module = &module;
    return q;
  }

  // The application's launch of `f` through the route, its parameters in kernelParams form,
  // or as one packed buffer (`extra`).
  CUresult launch(CudaLaunchRoute& route, CUfunction f, const std::vector<FakeArg>& args, StreamHandle stream,
                  bool packed = false) {
    std::vector<std::uint64_t> words;
    for (const FakeArg& a : args) {
      words.push_back(a.ptr);
      words.push_back(a.bytes);
    }
    std::vector<void*> params;
    for (std::uint64_t& w : words) params.push_back(&w);
    std::size_t size = words.size() * 8;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, words.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    return route.launch_kernel(&real_launch, false, f, 1, 1, 1, 128, 1, 1, 0, reinterpret_cast<CUstream>(stream),
                               packed ? nullptr : params.data(), packed ? extra : nullptr);
  }

  std::uint64_t calls = 0;             // launches the driver received (replays included)
  std::uint64_t unmapped_at_call = 0;  // ranges not mapped when the driver received a launch
  std::uint64_t module_handle = 0x77;  // what cuFuncGetModule answers for every kernel

 private:
  static FakeDriver& self() {
    if (current_ == nullptr) throw std::logic_error("FakeDriver: none in use");
    return *current_;
  }
  const FakeKernel& kernel(CUfunction f) const { return kernels_.at(reinterpret_cast<std::uintptr_t>(f) - 1); }

  static CUresult param_info(CUfunction f, size_t i, size_t* offset, size_t* size) {
    if (i >= 2 * self().kernel(f).writes.size()) return CUDA_ERROR_INVALID_VALUE;
    *offset = 8 * i;
    *size = 8;
    return CUDA_SUCCESS;
  }
  static CUresult name(const char** out, CUfunction f) {
    *out = self().kernel(f).name.c_str();
    return CUDA_SUCCESS;
  }
  static CUresult module(CUmodule* out, CUfunction) {
    *out = reinterpret_cast<CUmodule>(self().module_handle);
    return CUDA_SUCCESS;
  }

  static CUresult real_launch(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream stream, void** params, void** extra) {
    FakeDriver& d = self();
    const FakeKernel& k = d.kernel(f);
    std::vector<std::uint64_t> words(2 * k.writes.size());
    if (extra != nullptr) {
      std::memcpy(words.data(), extra[1], words.size() * 8);  // the layout launch() packs
    } else {
      for (std::size_t i = 0; i < words.size(); ++i) std::memcpy(&words[i], params[i], 8);
    }
    SimLaunch l;
    l.name = k.name;
    l.duration_ns = k.duration_ns;
    l.seed = reinterpret_cast<std::uintptr_t>(f);
    for (std::size_t i = 0; i < k.writes.size(); ++i) {
      const SimRange range{words[2 * i], words[2 * i + 1]};
      if (!d.sim_.is_mapped(range.ptr, range.bytes)) d.unmapped_at_call++;
      (k.writes[i] ? l.writes : l.reads).push_back(range);
    }
    d.calls++;
    d.sim_.launch(l, reinterpret_cast<StreamHandle>(stream));
    return CUDA_SUCCESS;
  }

  SimDevice& sim_;
  std::vector<FakeKernel> kernels_;
  static inline FakeDriver* current_ = nullptr;
};

}  // namespace delta::executor::testing
