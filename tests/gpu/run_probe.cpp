// Run mode's device costs on a real GPU, each figure written as soon as it is measured (one
// JSON object per line in the output file), for scripts/gpu-check's run stage:
//   vmm      cuMemMap, cuMemSetAccess and cuMemUnmap of one physical chunk of 2 MiB and of
//            64 MiB (medians of 20; the chunk made once, off the timed path, as the spare
//            pool does)
//   copies   bandwidth of DELTA's copies (its device layer, its pinned memory, its streams)
//            host to device, device to host, and both at once; and of plain pinned copies
//            (cuMemHostAlloc, cuMemcpy*Async on streams of their own) the same ways, same run
//   swap     a block of 64 MiB on pages of its own: filled, copied out, its pages unmapped
//            and mapped again, copied back: bytes-equal at the same address, and its time
// Exit status 0 when every check holds, 1 when one fails, 77 without a GPU.
//
// usage: run_probe OUT.jsonl
#include "device/cuda/cuda_driver.hpp"

#include <delta/allocator.hpp>
#include <delta/device.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace delta;
using Clock = std::chrono::steady_clock;

FILE* out = nullptr;
int failures = 0;

void emit(const std::string& json) {
  std::fprintf(out, "%s\n", json.c_str());
  std::fflush(out);
  std::printf("%s\n", json.c_str());
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cuda::describe_result(r));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

void vmm(const cuda::DriverApi& d, int ordinal) {
  for (const std::size_t size : {std::size_t{2} << 20, std::size_t{64} << 20}) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal;
    CUmemGenericAllocationHandle handle = 0;
    check(d.cuMemCreate(&handle, size, &prop, 0), "cuMemCreate");
    CUdeviceptr va = 0;
    check(d.cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve");
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    std::vector<double> map, set, unmap;
    for (int i = 0; i < 20; ++i) {
      const auto t0 = Clock::now();
      check(d.cuMemMap(va, size, 0, handle, 0), "cuMemMap");
      const auto t1 = Clock::now();
      check(d.cuMemSetAccess(va, size, &access, 1), "cuMemSetAccess");
      const auto t2 = Clock::now();
      check(d.cuMemUnmap(va, size), "cuMemUnmap");
      const auto t3 = Clock::now();
      map.push_back(micros(t0, t1));
      set.push_back(micros(t1, t2));
      unmap.push_back(micros(t2, t3));
    }
    d.cuMemAddressFree(va, size);
    d.cuMemRelease(handle);
    char line[256];
    std::snprintf(line, sizeof line,
                  "{\"probe\": \"vmm\", \"bytes\": %zu, \"map_us\": %.1f, \"set_access_us\": %.1f, \"unmap_us\": %.1f}",
                  size, median(map), median(set), median(unmap));
    emit(line);
  }
}

// GB/s of `issue` (which queues `bytes` of copies and returns after syncing), best of 5.
double bandwidth(std::size_t bytes, const std::function<void()>& issue) {
  issue();  // warm-up
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    issue();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, double(bytes) / s / 1e9);
  }
  return best;
}

void copies(const cuda::DriverApi& d, Device& device, CachingAllocator& allocator) {
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  const StreamHandle s_in = device.create_stream(), s_out = device.create_stream();
  void* dev_a = allocator.allocate(kBytes, s_in);
  void* dev_b = allocator.allocate(kBytes, s_out);
  void* host_a = device.alloc_pinned(kBytes);
  void* host_b = device.alloc_pinned(kBytes);
  const auto A = reinterpret_cast<DevicePtr>(dev_a), B = reinterpret_cast<DevicePtr>(dev_b);
  const double delta_h2d = bandwidth(kBytes, [&] {
    device.copy_h2d_async(A, host_a, kBytes, s_in);
    device.synchronize_stream(s_in);
  });
  const double delta_d2h = bandwidth(kBytes, [&] {
    device.copy_d2h_async(host_b, B, kBytes, s_out);
    device.synchronize_stream(s_out);
  });
  const double delta_both = bandwidth(2 * kBytes, [&] {
    device.copy_h2d_async(A, host_a, kBytes, s_in);
    device.copy_d2h_async(host_b, B, kBytes, s_out);
    device.synchronize_stream(s_in);
    device.synchronize_stream(s_out);
  });
  // Plain: the driver's own pinned memory and streams, nothing of DELTA's between.
  void *plain_a = nullptr, *plain_b = nullptr;
  check(d.cuMemHostAlloc(&plain_a, kBytes, 0), "cuMemHostAlloc");
  check(d.cuMemHostAlloc(&plain_b, kBytes, 0), "cuMemHostAlloc");
  CUstream p_in = nullptr, p_out = nullptr;
  check(d.cuStreamCreate(&p_in, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(d.cuStreamCreate(&p_out, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const double plain_h2d = bandwidth(kBytes, [&] {
    check(d.cuMemcpyHtoDAsync(A, plain_a, kBytes, p_in), "cuMemcpyHtoDAsync");
    check(d.cuStreamSynchronize(p_in), "cuStreamSynchronize");
  });
  const double plain_d2h = bandwidth(kBytes, [&] {
    check(d.cuMemcpyDtoHAsync(plain_b, B, kBytes, p_out), "cuMemcpyDtoHAsync");
    check(d.cuStreamSynchronize(p_out), "cuStreamSynchronize");
  });
  const double plain_both = bandwidth(2 * kBytes, [&] {
    check(d.cuMemcpyHtoDAsync(A, plain_a, kBytes, p_in), "cuMemcpyHtoDAsync");
    check(d.cuMemcpyDtoHAsync(plain_b, B, kBytes, p_out), "cuMemcpyDtoHAsync");
    check(d.cuStreamSynchronize(p_in), "cuStreamSynchronize");
    check(d.cuStreamSynchronize(p_out), "cuStreamSynchronize");
  });
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"probe\": \"copies\", \"bytes\": %zu, \"delta_h2d_gbs\": %.2f, \"delta_d2h_gbs\": %.2f, "
                "\"delta_both_gbs\": %.2f, \"plain_h2d_gbs\": %.2f, \"plain_d2h_gbs\": %.2f, \"plain_both_gbs\": %.2f, "
                "\"delta_over_plain_h2d\": %.3f, \"delta_over_plain_d2h\": %.3f}",
                kBytes, delta_h2d, delta_d2h, delta_both, plain_h2d, plain_d2h, plain_both, delta_h2d / plain_h2d,
                delta_d2h / plain_d2h);
  emit(line);
  // DELTA's copies are the driver's: more than 10% slower means something sits in between.
  if (delta_h2d < 0.9 * plain_h2d || delta_d2h < 0.9 * plain_d2h) {
    std::printf("FAIL: DELTA's copies run below 90%% of plain pinned copies\n");
    failures++;
  }
  d.cuStreamDestroy(p_in);
  d.cuStreamDestroy(p_out);
  d.cuMemFreeHost(plain_a);
  d.cuMemFreeHost(plain_b);
  device.free_pinned(host_a);
  device.free_pinned(host_b);
  allocator.deallocate(dev_a);
  allocator.deallocate(dev_b);
  device.synchronize();
  device.destroy_stream(s_in);
  device.destroy_stream(s_out);
}

void swap_round_trip(Device& device, CachingAllocator& allocator) {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  const StreamHandle stream = device.create_stream();
  void* block = allocator.allocate(kBytes, stream, Placement{.own_pages = true});
  const std::size_t rounded = *allocator.block_size(block);
  std::vector<unsigned char> pattern(kBytes), back(kBytes, 0);
  for (std::size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  auto* host = static_cast<unsigned char*>(device.alloc_pinned(kBytes));
  std::memcpy(host, pattern.data(), kBytes);
  const auto address = reinterpret_cast<DevicePtr>(block);
  device.copy_h2d_async(address, host, kBytes, stream);
  std::memset(host, 0, kBytes);
  const auto t0 = Clock::now();
  device.copy_d2h_async(host, address, kBytes, stream);  // out
  device.synchronize_stream(stream);
  const auto t1 = Clock::now();
  allocator.unmap_pages(block, 0, rounded);
  const bool gone = !allocator.pages_mapped(block, 0, rounded);
  const auto t2 = Clock::now();
  allocator.map_pages(block, 0, rounded);
  const auto t3 = Clock::now();
  device.copy_h2d_async(address, host, kBytes, stream);  // back
  device.synchronize_stream(stream);
  const auto t4 = Clock::now();
  device.copy_d2h_async(back.data(), address, kBytes, stream);  // pageable: a check, not timed
  device.synchronize_stream(stream);
  const bool equal = back == pattern;
  char line[384];
  std::snprintf(line, sizeof line,
                "{\"probe\": \"swap\", \"bytes\": %zu, \"bytes_equal\": %s, \"same_address\": true, \"unmapped_between\": %s, "
                "\"out_us\": %.1f, \"unmap_us\": %.1f, \"map_us\": %.1f, \"in_us\": %.1f}",
                kBytes, equal ? "true" : "false", gone ? "true" : "false", micros(t0, t1), micros(t1, t2), micros(t2, t3),
                micros(t3, t4));
  emit(line);
  if (!equal || !gone) {
    std::printf("FAIL: the swapped block %s\n", !equal ? "came back with other bytes" : "was never unmapped");
    failures++;
  }
  device.free_pinned(host);
  allocator.deallocate(block);
  device.synchronize();
  device.destroy_stream(stream);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: run_probe OUT.jsonl\n");
    return 2;
  }
  std::shared_ptr<Device> device;
  try {
    device = make_cuda_device(0);
  } catch (const std::exception& e) {
    std::printf("no GPU: %s\n", e.what());
    return 77;
  }
  out = std::fopen(argv[1], "w");
  if (out == nullptr) return 2;
  try {
    const cuda::DriverApi& d = cuda::driver();
    vmm(d, device->ordinal());
    CachingAllocator allocator(device, AllocatorConfig{});
    copies(d, *device, allocator);
    swap_round_trip(*device, allocator);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    failures++;
  }
  std::fclose(out);
  return failures == 0 ? 0 : 1;
}
