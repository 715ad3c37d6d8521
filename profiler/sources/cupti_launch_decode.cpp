#include "profiler/sources/cupti_launch_decode.hpp"

// <cupti.h> (through the header) brings the params structs of generated_cuda_meta.h and
// generated_cuda_runtime_api_meta.h; those headers have no include guards.

#include <algorithm>

namespace delta::profiler {
namespace {

std::uint64_t stream_id(const void* stream) { return reinterpret_cast<std::uint64_t>(stream); }
std::uint64_t address(const void* pointer) { return reinterpret_cast<std::uint64_t>(pointer); }

template <typename P>
const P& as(const void* params) {
  return *static_cast<const P*>(params);
}

std::optional<trace::OpKind> runtime_copy_kind(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToDevice: return trace::OpKind::copy_h2d;
    case cudaMemcpyDeviceToHost: return trace::OpKind::copy_d2h;
    case cudaMemcpyDeviceToDevice: return trace::OpKind::copy_d2d;
    default: return std::nullopt;  // host to host or cudaMemcpyDefault: look at the addresses
  }
}

}  // namespace

const std::vector<CUpti_CallbackId>& runtime_callback_ids() {
  static const std::vector<CUpti_CallbackId> ids = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
  };
  return ids;
}

const std::vector<CUpti_CallbackId>& driver_callback_ids() {
  static const std::vector<CUpti_CallbackId> ids = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
  };
  return ids;
}

bool is_launch_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000: return true;
      default: return false;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: return true;
      default: return false;
    }
  }
  return false;
}

bool is_transfer_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (is_launch_callback(domain, cbid)) return false;
  const auto& ids = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_callback_ids()
                    : domain == CUPTI_CB_DOMAIN_DRIVER_API ? driver_callback_ids()
                                                          : std::vector<CUpti_CallbackId>{};
  return std::find(ids.begin(), ids.end(), cbid) != ids.end();
}

std::optional<DecodedLaunch> decode_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params) {
  if (params == nullptr) return std::nullopt;
  DecodedLaunch out;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    out.runtime = true;
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
        // The _ptsz struct has the same members in the same order.
        const auto& p = as<cudaLaunchKernel_v7000_params>(params);
        out.handle_kind = DecodedLaunch::Handle::host_stub;
        out.handle = p.func;
        out.args = p.args;
        out.stream = stream_id(p.stream);
        return out;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
        const auto& p = as<cudaLaunchKernelExC_v11060_params>(params);
        out.handle_kind = DecodedLaunch::Handle::host_stub;
        out.handle = p.func;
        out.args = p.args;
        out.stream = p.config ? stream_id(p.config->stream) : 0;
        return out;
      }
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000: {
        const auto& p = as<DunderLaunchKernelParams>(params);
        out.handle_kind = DecodedLaunch::Handle::kernel;
        out.handle = p.kernel;
        out.args = p.args;
        out.stream = stream_id(p.stream);
        return out;
      }
      default: return std::nullopt;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
        const auto& p = as<cuLaunchKernel_params>(params);
        out.handle = p.f;
        out.args = p.kernelParams;
        out.extra = p.extra;
        out.stream = stream_id(p.hStream);
        return out;
      }
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
        const auto& p = as<cuLaunchKernelEx_params>(params);
        out.handle = p.f;
        out.args = p.kernelParams;
        out.extra = p.extra;
        out.stream = p.config ? stream_id(p.config->hStream) : 0;
        return out;
      }
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<DecodedTransfer> decode_transfer(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params) {
  if (params == nullptr) return std::nullopt;
  DecodedTransfer out;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    out.runtime = true;
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000: {
        const auto& p = as<cudaMemcpy_v3020_params>(params);
        out = {runtime_copy_kind(p.kind), address(p.dst), address(p.src), p.count, 0, true};
        return out;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000: {
        const auto& p = as<cudaMemcpyAsync_v3020_params>(params);
        out = {runtime_copy_kind(p.kind), address(p.dst), address(p.src), p.count, stream_id(p.stream), true};
        return out;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000: {
        const auto& p = as<cudaMemset_v3020_params>(params);
        out = {trace::OpKind::memset, address(p.devPtr), 0, p.count, 0, true};
        return out;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000: {
        const auto& p = as<cudaMemsetAsync_v3020_params>(params);
        out = {trace::OpKind::memset, address(p.devPtr), 0, p.count, stream_id(p.stream), true};
        return out;
      }
      default: return std::nullopt;
    }
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return std::nullopt;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz: {
      const auto& p = as<cuMemcpyAsync_params>(params);
      out = {std::nullopt, p.dst, p.src, p.ByteCount, stream_id(p.hStream), false};
      return out;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz: {
      const auto& p = as<cuMemcpyHtoDAsync_v2_params>(params);
      out = {trace::OpKind::copy_h2d, p.dstDevice, address(p.srcHost), p.ByteCount, stream_id(p.hStream), false};
      return out;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz: {
      const auto& p = as<cuMemcpyDtoHAsync_v2_params>(params);
      out = {trace::OpKind::copy_d2h, address(p.dstHost), p.srcDevice, p.ByteCount, stream_id(p.hStream), false};
      return out;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz: {
      const auto& p = as<cuMemcpyDtoDAsync_v2_params>(params);
      out = {trace::OpKind::copy_d2d, p.dstDevice, p.srcDevice, p.ByteCount, stream_id(p.hStream), false};
      return out;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz: {
      const auto& p = as<cuMemsetD8Async_params>(params);
      out = {trace::OpKind::memset, p.dstDevice, 0, p.N, stream_id(p.hStream), false};
      return out;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async:
    case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz: {
      const auto& p = as<cuMemsetD32Async_params>(params);
      out = {trace::OpKind::memset, p.dstDevice, 0, p.N * 4, stream_id(p.hStream), false};
      return out;
    }
    default: return std::nullopt;
  }
}

std::span<const std::byte> extra_param_buffer(void* const* extra) {
  if (extra == nullptr) return {};
  const void* buffer = nullptr;
  std::size_t size = 0;
  bool has_size = false;
  // Pairs of (key, value) up to CU_LAUNCH_PARAM_END; a bound keeps a malformed list harmless.
  for (int i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = extra[i + 1];
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) {
      size = *static_cast<const std::size_t*>(extra[i + 1]);
      has_size = true;
    }
  }
  if (buffer == nullptr || !has_size) return {};
  return {static_cast<const std::byte*>(buffer), size};
}

bool attribute_launch(const DecodedLaunch& launch, const ParamLayout* layout, const BlockMap& blocks, trace::Op& op) {
  if (launch.args != nullptr && layout != nullptr) {
    scan_kernel_args(*layout, launch.args, blocks, op.blocks);
    return true;
  }
  const auto buffer = extra_param_buffer(launch.extra);
  if (!buffer.empty()) {
    scan_param_buffer(buffer, blocks, op.blocks);
    return true;
  }
  return false;
}

void attribute_transfer(const DecodedTransfer& transfer, const BlockMap& blocks, trace::Op& op) {
  const std::size_t before = op.blocks.size();
  attribute_range(transfer.dst, transfer.bytes, trace::Access::write, blocks, op.blocks);
  const bool dst_on_device = op.blocks.size() > before;
  bool src_on_device = false;
  if (transfer.src != 0) {
    const std::size_t mid = op.blocks.size();
    attribute_range(transfer.src, transfer.bytes, trace::Access::read, blocks, op.blocks);
    src_on_device = op.blocks.size() > mid || (!blocks.overlapping(transfer.src, transfer.bytes).empty());
  }
  if (transfer.kind) {
    op.kind = *transfer.kind;
  } else {
    // Unified addressing: where the bytes live says which way they go.
    op.kind = dst_on_device && src_on_device ? trace::OpKind::copy_d2d
              : dst_on_device                ? trace::OpKind::copy_h2d
              : src_on_device                ? trace::OpKind::copy_d2h
                                             : trace::OpKind::copy_d2d;
  }
  op.bytes = transfer.bytes;
}

}  // namespace delta::profiler
