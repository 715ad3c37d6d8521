#include "profiler/directions/cuda_copy_stager.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace delta::profiler {

struct CudaCopyStager::Api {
  decltype(&::cuMemAllocAsync) alloc_async = nullptr;
  decltype(&::cuMemFreeAsync) free_async = nullptr;
  decltype(&::cuMemcpyDtoDAsync_v2) copy_async = nullptr;
};

namespace {

template <typename Fn>
void resolve(void* driver, const char* name, Fn& slot, int version) {
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(driver, "cuGetProcAddress_v2"));
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (!get_proc || get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
      status != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
    throw std::runtime_error(std::string("DELTA direction learning: the driver has no ") + name);
  slot = reinterpret_cast<Fn>(fn);
}

void check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS)
    throw std::runtime_error(std::string("DELTA direction learning: ") + what + " failed (CUresult " +
                             std::to_string(result) + ")");
}

}  // namespace

CudaCopyStager::CudaCopyStager() : api_(std::make_unique<Api>()) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) throw std::runtime_error("DELTA direction learning: libcuda.so.1 cannot be loaded");
  resolve(driver, "cuMemAllocAsync", api_->alloc_async, 11020);
  resolve(driver, "cuMemFreeAsync", api_->free_async, 11020);
  resolve(driver, "cuMemcpyDtoDAsync", api_->copy_async, 3020);
}

CudaCopyStager::~CudaCopyStager() = default;

std::uint64_t CudaCopyStager::allocate(std::size_t bytes, std::uint64_t stream) {
  CUdeviceptr ptr = 0;
  // Out of memory is an answer (no replays for this launch), not an error.
  if (api_->alloc_async(&ptr, bytes, reinterpret_cast<CUstream>(stream)) != CUDA_SUCCESS) return 0;
  return ptr;
}

void CudaCopyStager::copy(std::uint64_t dst, std::uint64_t src, std::size_t bytes, std::uint64_t stream) {
  check(api_->copy_async(dst, src, bytes, reinterpret_cast<CUstream>(stream)), "cuMemcpyDtoDAsync");
}

void CudaCopyStager::release(std::uint64_t address, std::size_t, std::uint64_t stream) {
  check(api_->free_async(address, reinterpret_cast<CUstream>(stream)), "cuMemFreeAsync");
}

}  // namespace delta::profiler
