// Reading CUPTI callback parameters: which kernel a launch runs, with which arguments, on
// which stream; which bytes a copy or memset moves. Pure functions over the parameter structs
// (generated_cuda_meta.h, generated_cuda_runtime_api_meta.h), so they are tested without a GPU.
//
// Launch entry points (CBIDs from cupti_runtime_cbid.h / cupti_driver_cbid.h, CUDA 13):
//   runtime cudaLaunchKernel(_ptsz)     211 / 214   host stub + void** args
//   runtime cudaLaunchKernelExC(_ptsz)  430 / 431   host stub + void** args, stream in config
//   runtime __cudaLaunchKernel(_ptsz)   505 / 506   cudaKernel_t + void** args (what <<<>>> compiles
//                                                    to in CUDA 13; no params struct is published,
//                                                    so it is mirrored from the prototype)
//   driver  cuLaunchKernel(_ptsz)       307 / 442   CUfunction + kernelParams or extra
//   driver  cuLaunchKernelEx(_ptsz)     652 / 653   CUfunction + kernelParams or extra
#pragma once

#include "profiler/directions/param_scan.hpp"

#include <cupti.h>

#include <delta/trace.hpp>

#include <cstdint>
#include <optional>

namespace delta::profiler {

// The parameters of __cudaLaunchKernel(_ptsz), laid out as CUPTI lays out every params
// struct: the function's arguments in order (crt/device_functions.h).
struct DunderLaunchKernelParams {
  cudaKernel_t kernel;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};

struct DecodedLaunch {
  enum class Handle { function, kernel, host_stub };
  Handle handle_kind = Handle::function;
  const void* handle = nullptr;  // CUfunction, CUkernel (cudaKernel_t) or the host stub
  std::uint64_t stream = 0;
  void** args = nullptr;         // args[i] -> value of parameter i
  void** extra = nullptr;        // driver "extra" (CU_LAUNCH_PARAM_BUFFER_POINTER ...)
  bool runtime = false;          // runtime API (its driver calls may nest inside)
};

struct DecodedTransfer {
  std::optional<trace::OpKind> kind;  // nullopt: cudaMemcpyDefault, decided by the addresses
  std::uint64_t dst = 0, src = 0;     // src = 0 for memsets
  std::uint64_t bytes = 0;
  std::uint64_t stream = 0;
  bool runtime = false;
};

bool is_launch_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
bool is_transfer_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

std::optional<DecodedLaunch> decode_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params);
std::optional<DecodedTransfer> decode_transfer(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params);

// The packed param buffer passed through `extra`, or an empty span when there is none.
std::span<const std::byte> extra_param_buffer(void* const* extra);

// Fills op.blocks from a launch: the args by `layout` when it is known, else the packed buffer
// of `extra`. Returns false when neither could be read (the launch stays unattributed).
bool attribute_launch(const DecodedLaunch& launch, const ParamLayout* layout, const BlockMap& blocks, trace::Op& op);

// Fills op.blocks (dst written, src read) and decides op.kind for cudaMemcpyDefault copies.
void attribute_transfer(const DecodedTransfer& transfer, const BlockMap& blocks, trace::Op& op);

// The CBIDs to enable, per domain.
const std::vector<CUpti_CallbackId>& runtime_callback_ids();
const std::vector<CUpti_CallbackId>& driver_callback_ids();

}  // namespace delta::profiler
