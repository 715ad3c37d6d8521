// The cuda device: delta::Device over the CUDA driver API (loaded at run time, see
// cuda_driver.hpp).
//
// Contexts: every call makes sure the calling thread has a current context. When it has none,
// the device's primary context is made current: the very context the CUDA runtime and PyTorch
// use, so pointers, streams and events are shared with them. A context that is already current
// is left alone, so DELTA never changes which context a caller's thread works in.
#include "cuda_driver.hpp"
#include "logging/log.hpp"

#include <delta/device.hpp>

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <string>

namespace delta {
namespace {

using cuda::DriverApi;


DeviceErrc errc_for(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: return DeviceErrc::out_of_memory;
    case CUDA_ERROR_INVALID_VALUE: return DeviceErrc::invalid_value;
    case CUDA_ERROR_NOT_MAPPED: return DeviceErrc::not_mapped;
    case CUDA_ERROR_ALREADY_MAPPED: return DeviceErrc::already_mapped;
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return DeviceErrc::invalid_handle;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE: return DeviceErrc::no_device;
    default: return DeviceErrc::driver_error;
  }
}

[[noreturn]] void fail(CUresult result, const std::string& call) {
  throw DeviceError(errc_for(result), call + " failed: " + cuda::describe_result(result));
}

std::string hex(std::uintptr_t value) { return fmt::format("{:#x}", value); }

// DELTA's stream handles carry the runtime's values; the two special ones name the driver's
// legacy and per-thread default streams, everything else is a CUstream created by someone.
CUstream to_cu(StreamHandle stream) {
  switch (stream) {
    case 0: return nullptr;
    case kLegacyStream: return CU_STREAM_LEGACY;
    case kPerThreadStream: return CU_STREAM_PER_THREAD;
    default: return reinterpret_cast<CUstream>(stream);
  }
}
CUevent to_cu_event(EventHandle event) { return reinterpret_cast<CUevent>(event); }

class CudaDevice final : public Device {
 public:
  CudaDevice(const DriverApi& api, int ordinal) : api_(api), ordinal_(ordinal) {
    check(api_.cuDeviceGet(&device_, ordinal_), fmt::format("cuDeviceGet(ordinal={})", ordinal_));
    check(api_.cuDevicePrimaryCtxRetain(&primary_, device_),
          fmt::format("cuDevicePrimaryCtxRetain(device={})", ordinal_));
    char name[256] = {};
    if (api_.cuDeviceGetName(name, sizeof(name) - 1, device_) != CUDA_SUCCESS) name[0] = '\0';
    name_ = name;
    log::debug("delta: cuda device {} ({}) opened via {}", ordinal_, name_,
               cuda::loaded_driver_path());
  }

  ~CudaDevice() override {
    // At process exit the driver may already be shut down (CUDA_ERROR_DEINITIALIZED); the
    // context goes away with the process then, so the result is deliberately ignored.
    (void)api_.cuDevicePrimaryCtxRelease(device_);
  }

  std::string_view kind() const noexcept override { return "cuda"; }
  int ordinal() const noexcept override { return ordinal_; }

  MemInfo mem_info() override {
    ensure_context();
    MemInfo info;
    check(api_.cuMemGetInfo(&info.free_bytes, &info.total_bytes),
          fmt::format("cuMemGetInfo(device={})", ordinal_));
    return info;
  }

  std::size_t granularity() override {
    std::size_t cached = granularity_.load(std::memory_order_relaxed);
    if (cached != 0) return cached;
    ensure_context();
    CUmemAllocationProp prop = physical_properties();
    std::size_t value = 0;
    check(api_.cuMemGetAllocationGranularity(&value, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          fmt::format("cuMemGetAllocationGranularity(device={}, minimum)", ordinal_));
    granularity_.store(value, std::memory_order_relaxed);
    return value;
  }

  DevicePtr reserve(std::size_t size) override {
    require_granular(size, "reserve");
    ensure_context();
    CUdeviceptr va = 0;
    check(api_.cuMemAddressReserve(&va, size, 0, 0, 0),
          fmt::format("cuMemAddressReserve(size={})", size));
    return static_cast<DevicePtr>(va);
  }

  void release_reservation(DevicePtr va, std::size_t size) override {
    ensure_context();
    check(api_.cuMemAddressFree(static_cast<CUdeviceptr>(va), size),
          fmt::format("cuMemAddressFree(va={}, size={})", hex(va), size));
  }

  PhysHandle create_physical(std::size_t size) override {
    require_granular(size, "create_physical");
    ensure_context();
    CUmemAllocationProp prop = physical_properties();
    CUmemGenericAllocationHandle handle = 0;
    CUresult result = api_.cuMemCreate(&handle, size, &prop, 0);
    if (result != CUDA_SUCCESS) {
      std::string call = fmt::format("cuMemCreate(size={}, device={})", size, ordinal_);
      if (result == CUDA_ERROR_OUT_OF_MEMORY) {
        MemInfo info{};
        (void)api_.cuMemGetInfo(&info.free_bytes, &info.total_bytes);
        call += fmt::format(" with {} of {} bytes free on the device", info.free_bytes,
                            info.total_bytes);
      }
      fail(result, call);
    }
    return static_cast<PhysHandle>(handle);
  }

  void release_physical(PhysHandle handle) override {
    if (handle == 0) throw DeviceError(DeviceErrc::invalid_handle, "release_physical: handle 0 is never valid");
    ensure_context();
    check(api_.cuMemRelease(static_cast<CUmemGenericAllocationHandle>(handle)),
          fmt::format("cuMemRelease(handle={})", hex(handle)));
  }

  void map(DevicePtr va, std::size_t size, PhysHandle handle) override {
    if (handle == 0) throw DeviceError(DeviceErrc::invalid_handle, fmt::format("map(va={}): handle 0 is never valid", hex(va)));
    require_granular(size, "map");
    ensure_context();
    const auto address = static_cast<CUdeviceptr>(va);
    check(api_.cuMemMap(address, size, 0, static_cast<CUmemGenericAllocationHandle>(handle), 0),
          fmt::format("cuMemMap(va={}, size={}, handle={})", hex(va), size, hex(handle)));
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUresult result = api_.cuMemSetAccess(address, size, &access, 1);
    if (result != CUDA_SUCCESS) {
      // A mapping nobody may touch is useless and would block the range: undo it.
      (void)api_.cuMemUnmap(address, size);
      fail(result, fmt::format("cuMemSetAccess(va={}, size={}, device={}, read/write)", hex(va),
                               size, ordinal_));
    }
  }

  void unmap(DevicePtr va, std::size_t size) override {
    ensure_context();
    check(api_.cuMemUnmap(static_cast<CUdeviceptr>(va), size),
          fmt::format("cuMemUnmap(va={}, size={})", hex(va), size));
  }

  StreamHandle create_stream() override {
    ensure_context();
    CUstream stream = nullptr;
    // Non-blocking, like PyTorch's side streams: DELTA's copy stream must not serialize with
    // the legacy default stream; ordering is expressed with events.
    check(api_.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate(non-blocking)");
    return reinterpret_cast<StreamHandle>(stream);
  }

  void destroy_stream(StreamHandle stream) override {
    if (stream == 0 || stream == kLegacyStream || stream == kPerThreadStream) {
      throw DeviceError(DeviceErrc::invalid_handle,
                        fmt::format("destroy_stream({}): a default stream cannot be destroyed", hex(stream)));
    }
    ensure_context();
    check(api_.cuStreamDestroy(to_cu(stream)), fmt::format("cuStreamDestroy(stream={})", hex(stream)));
  }

  void synchronize_stream(StreamHandle stream) override {
    ensure_context();
    check(api_.cuStreamSynchronize(to_cu(stream)),
          fmt::format("cuStreamSynchronize(stream={})", hex(stream)));
  }

  void synchronize() override {
    // cuCtxSynchronize waits for the current context: make it this device's primary one for the
    // call, and give the caller back whatever was current.
    CUcontext current = nullptr;
    check(api_.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current != primary_)
      check(api_.cuCtxSetCurrent(primary_), fmt::format("cuCtxSetCurrent(primary context of device {})", ordinal_));
    const CUresult result = api_.cuCtxSynchronize();
    if (current != nullptr && current != primary_) api_.cuCtxSetCurrent(current);
    check(result, fmt::format("cuCtxSynchronize(device={})", ordinal_));
  }

  EventHandle create_event() override {
    ensure_context();
    CUevent event = nullptr;
    check(api_.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate(disable timing)");
    return reinterpret_cast<EventHandle>(event);
  }

  void destroy_event(EventHandle event) override {
    require_event(event, "destroy_event");
    ensure_context();
    check(api_.cuEventDestroy(to_cu_event(event)), fmt::format("cuEventDestroy(event={})", hex(event)));
  }

  void record_event(EventHandle event, StreamHandle stream) override {
    require_event(event, "record_event");
    ensure_context();
    check(api_.cuEventRecord(to_cu_event(event), to_cu(stream)),
          fmt::format("cuEventRecord(event={}, stream={})", hex(event), hex(stream)));
  }

  bool query_event(EventHandle event) override {
    require_event(event, "query_event");
    ensure_context();
    CUresult result = api_.cuEventQuery(to_cu_event(event));
    if (result == CUDA_SUCCESS) return true;
    if (result == CUDA_ERROR_NOT_READY) return false;
    fail(result, fmt::format("cuEventQuery(event={})", hex(event)));
  }

  void synchronize_event(EventHandle event) override {
    require_event(event, "synchronize_event");
    ensure_context();
    check(api_.cuEventSynchronize(to_cu_event(event)),
          fmt::format("cuEventSynchronize(event={})", hex(event)));
  }

  void stream_wait_event(StreamHandle stream, EventHandle event) override {
    require_event(event, "stream_wait_event");
    ensure_context();
    check(api_.cuStreamWaitEvent(to_cu(stream), to_cu_event(event), CU_EVENT_WAIT_DEFAULT),
          fmt::format("cuStreamWaitEvent(stream={}, event={})", hex(stream), hex(event)));
  }

  void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, StreamHandle stream) override {
    if (bytes == 0) return;
    ensure_context();
    check(api_.cuMemcpyHtoDAsync(static_cast<CUdeviceptr>(dst), src, bytes, to_cu(stream)),
          fmt::format("cuMemcpyHtoDAsync(dst={}, src={}, bytes={}, stream={})", hex(dst),
                      fmt::ptr(src), bytes, hex(stream)));
  }

  void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, StreamHandle stream) override {
    if (bytes == 0) return;
    ensure_context();
    check(api_.cuMemcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), bytes, to_cu(stream)),
          fmt::format("cuMemcpyDtoHAsync(dst={}, src={}, bytes={}, stream={})", fmt::ptr(dst),
                      hex(src), bytes, hex(stream)));
  }

  void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, StreamHandle stream) override {
    if (bytes == 0) return;
    ensure_context();
    check(api_.cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src),
                                 bytes, to_cu(stream)),
          fmt::format("cuMemcpyDtoDAsync(dst={}, src={}, bytes={}, stream={})", hex(dst),
                      hex(src), bytes, hex(stream)));
  }

  void memset_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, StreamHandle stream) override {
    if (bytes == 0) return;
    ensure_context();
    check(api_.cuMemsetD8Async(static_cast<CUdeviceptr>(dst), value, bytes, to_cu(stream)),
          fmt::format("cuMemsetD8Async(dst={}, value={}, bytes={}, stream={})", hex(dst),
                      value, bytes, hex(stream)));
  }

  void* alloc_pinned(std::size_t bytes) override {
    if (bytes == 0) throw DeviceError(DeviceErrc::invalid_value, "alloc_pinned: size 0 requested");
    ensure_context();
    void* ptr = nullptr;
    // Portable: the buffer is pinned for every context, whichever one is current later.
    check(api_.cuMemHostAlloc(&ptr, bytes, CU_MEMHOSTALLOC_PORTABLE),
          fmt::format("cuMemHostAlloc(bytes={}, portable)", bytes));
    return ptr;
  }

  void free_pinned(void* ptr) override {
    if (ptr == nullptr) return;
    ensure_context();
    check(api_.cuMemFreeHost(ptr), fmt::format("cuMemFreeHost(ptr={})", fmt::ptr(ptr)));
  }

 private:
  void check(CUresult result, const std::string& call) const {
    if (result != CUDA_SUCCESS) fail(result, call);
  }

  void ensure_context() const {
    CUcontext current = nullptr;
    check(api_.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current != nullptr) return;
    check(api_.cuCtxSetCurrent(primary_),
          fmt::format("cuCtxSetCurrent(primary context of device {})", ordinal_));
  }

  CUmemAllocationProp physical_properties() const {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal_;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    return prop;
  }

  // The driver would refuse these too, but with a bare CUDA_ERROR_INVALID_VALUE.
  void require_granular(std::size_t size, const char* operation) {
    const std::size_t unit = granularity();
    if (size == 0 || size % unit != 0) {
      throw DeviceError(DeviceErrc::invalid_value,
                        fmt::format("{}: size {} is not a positive multiple of the allocation "
                                    "granularity {} of device {}", operation, size, unit, ordinal_));
    }
  }

  static void require_event(EventHandle event, const char* operation) {
    if (event == 0) throw DeviceError(DeviceErrc::invalid_handle, fmt::format("{}: event handle 0 is never valid", operation));
  }

  const DriverApi& api_;
  const int ordinal_;
  CUdevice device_ = 0;
  CUcontext primary_ = nullptr;
  std::string name_;
  std::atomic<std::size_t> granularity_{0};
};

}  // namespace

std::shared_ptr<Device> make_cuda_device(int ordinal) {
  const DriverApi& api = cuda::driver();  // throws no_driver / no_device
  int count = 0;
  CUresult result = api.cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    throw DeviceError(DeviceErrc::no_device,
                      "cuDeviceGetCount failed: " + cuda::describe_result(result));
  }
  if (ordinal < 0 || ordinal >= count) {
    throw DeviceError(DeviceErrc::no_device,
                      fmt::format("CUDA device ordinal {} is out of range: the driver sees {} "
                                  "device(s) (check CUDA_VISIBLE_DEVICES)", ordinal, count));
  }
  return std::make_shared<CudaDevice>(api, ordinal);
}

}  // namespace delta
