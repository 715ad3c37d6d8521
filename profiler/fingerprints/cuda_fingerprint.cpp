#include "profiler/fingerprints/cuda_fingerprint.hpp"

#include "profiler/fingerprints/fingerprint_kernel_ptx.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace delta::profiler {

// The driver entry points, through cuGetProcAddress as the device layer resolves its own.
struct CudaFingerprinter::Api {
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&::cuMemFreeHost) mem_free_host = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuMemsetD8) memset_d8 = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;  // the CUDA 12 prototype (13 added a context argument)
};

namespace {

void check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) throw std::runtime_error(std::string("DELTA fingerprints: ") + what + " failed (CUresult " + std::to_string(result) + ")");
}

template <typename Fn>
void resolve(void* driver, const char* name, Fn& slot, int version = CUDA_VERSION) {
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(driver, "cuGetProcAddress_v2"));
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (!get_proc || get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
    throw std::runtime_error(std::string("DELTA fingerprints: the driver has no ") + name);
  slot = reinterpret_cast<Fn>(fn);
}

}  // namespace

CudaFingerprinter::CudaFingerprinter() : api_(std::make_unique<Api>()) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) throw std::runtime_error("DELTA fingerprints: libcuda.so.1 cannot be loaded");
  resolve(driver, "cuModuleLoadData", api_->module_load_data);
  resolve(driver, "cuModuleUnload", api_->module_unload);
  resolve(driver, "cuModuleGetFunction", api_->module_get_function);
  resolve(driver, "cuLaunchKernel", api_->launch_kernel);
  resolve(driver, "cuMemAlloc", api_->mem_alloc);
  resolve(driver, "cuMemFree", api_->mem_free);
  resolve(driver, "cuMemHostAlloc", api_->mem_host_alloc);
  resolve(driver, "cuMemFreeHost", api_->mem_free_host);
  resolve(driver, "cuMemcpyDtoH", api_->memcpy_dtoh);
  resolve(driver, "cuMemsetD8", api_->memset_d8);
  resolve(driver, "cuCtxSynchronize", api_->ctx_synchronize, 12000);
  CUmodule module = nullptr;
  check(api_->module_load_data(&module, kFingerprintPtx), "cuModuleLoadData");
  module_ = module;
  CUfunction function = nullptr;
  check(api_->module_get_function(&function, module, "delta_fingerprint"), "cuModuleGetFunction");
  function_ = function;
  CUdeviceptr slots = 0;
  check(api_->mem_alloc(&slots, kSlots * sizeof(std::uint64_t)), "cuMemAlloc");
  slots_ = slots;
  void* host = nullptr;
  check(api_->mem_host_alloc(&host, kSlots * sizeof(std::uint64_t), 0), "cuMemHostAlloc");
  host_ = static_cast<std::uint64_t*>(host);
  check(api_->memset_d8(slots_, 0, kSlots * sizeof(std::uint64_t)), "cuMemsetD8");
}

CudaFingerprinter::~CudaFingerprinter() {
  try {
    drain();
  } catch (...) {
  }
  if (host_) api_->mem_free_host(host_);
  if (slots_) api_->mem_free(slots_);
  if (module_) api_->module_unload(static_cast<CUmodule>(module_));
}

void CudaFingerprinter::submit(std::span<const FingerprintRange> ranges, std::uint64_t stream, std::uint64_t* out) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (waiting_.size() == kSlots) drain();
    CUdeviceptr base = ranges[i].address;
    std::uint64_t bytes = ranges[i].bytes;
    CUdeviceptr slot = slots_ + waiting_.size() * sizeof(std::uint64_t);
    void* args[] = {&base, &bytes, &slot};
    // Enough blocks to fill an H200 on large ranges, one for small ones.
    const std::uint64_t words = bytes / 8;
    const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>(1024, std::max<std::uint64_t>(1, words / (256 * 16))));
    check(api_->launch_kernel(static_cast<CUfunction>(function_), blocks, 1, 1, 256, 1, 1, 0,
                              reinterpret_cast<CUstream>(stream), args, nullptr),
          "cuLaunchKernel(delta_fingerprint)");
    waiting_.push_back(out + i);
  }
}

void CudaFingerprinter::drain() {
  if (waiting_.empty()) return;
  // The fingerprints were queued on the launches' streams, possibly several: one wait for the
  // whole context, then the slots back and cleared (the learner drains once, at its end).
  check(api_->ctx_synchronize(), "cuCtxSynchronize");
  check(api_->memcpy_dtoh(host_, slots_, waiting_.size() * sizeof(std::uint64_t)), "cuMemcpyDtoH");
  check(api_->memset_d8(slots_, 0, waiting_.size() * sizeof(std::uint64_t)), "cuMemsetD8");
  for (std::size_t i = 0; i < waiting_.size(); ++i) *waiting_[i] = host_[i];
  waiting_.clear();
}

}  // namespace delta::profiler
