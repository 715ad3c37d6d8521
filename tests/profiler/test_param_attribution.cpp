#include "profiler/sources/cupti_kernel_params.hpp"
#include "profiler/sources/cupti_launch_decode.hpp"
#include "profiler/directions/param_scan.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <set>

using namespace delta::profiler;
using delta::trace::Access;
using delta::trace::BlockUse;
using delta::trace::Op;
using delta::trace::OpKind;

namespace {

// Three live blocks at device-looking addresses.
BlockMap three_blocks() {
  BlockMap map;
  map.insert(0x7f0000000000, 0x1000, 1);
  map.insert(0x7f0000200000, 0x200000, 2);
  map.insert(0x7f0000600000, 0x400, 3);
  return map;
}

std::set<std::pair<std::uint64_t, Access>> as_set(const std::vector<BlockUse>& uses) {
  std::set<std::pair<std::uint64_t, Access>> out;
  for (const BlockUse& use : uses) out.emplace(use.block, use.access);
  return out;
}

template <typename T>
void put(std::vector<std::byte>& buffer, std::size_t offset, T value) {
  if (buffer.size() < offset + sizeof value) buffer.resize(offset + sizeof value);
  std::memcpy(buffer.data() + offset, &value, sizeof value);
}

}  // namespace

TEST_CASE("a packed param buffer names every block an aligned word points into") {
  const BlockMap blocks = three_blocks();
  std::vector<std::byte> buffer;
  put<std::uint64_t>(buffer, 0, 0x7f0000000000);       // block 1, first byte
  put<std::int32_t>(buffer, 8, 42);                     // an int
  put<std::int32_t>(buffer, 12, 7);
  put<std::uint64_t>(buffer, 16, 0x7f00002ffff8);       // block 2, interior
  put<double>(buffer, 24, 3.5);                         // a double
  put<std::uint64_t>(buffer, 32, 0x7f0000000ffc);       // block 1 again (a view)
  put<std::uint64_t>(buffer, 40, 0x7f0000001000);       // one past block 1: nothing
  std::vector<BlockUse> uses;
  scan_param_buffer(buffer, blocks, uses);
  CHECK(as_set(uses) == std::set<std::pair<std::uint64_t, Access>>{{1, Access::touch}, {2, Access::touch}});
  CHECK(uses.size() == 2);  // block 1 is listed once
}

TEST_CASE("kernel args are read by the driver's layout, structs passed by value included") {
  const BlockMap blocks = three_blocks();
  // kernel(float* a, int n, float* b, struct { int k; int pad; float* p[2]; } s, short t, float* c)
  // laid out: a@0 (8), n@8 (4), b@16 (8), s@24 (24: pointers at +8 and +16), t@48 (2), c@56 (8).
  std::uint64_t a = 0x7f0000000010, b = 0, c = 0x7f0000600100;
  std::int32_t n = 5;
  struct {
    std::int32_t k, pad;
    std::uint64_t p[2];
  } s{1, 0, {0x7f0000250000, 0x1234}};
  std::int16_t t = 3;
  void* args[] = {&a, &n, &b, &s, &t, &c};
  const ParamLayout layout = {{0, 8}, {8, 4}, {16, 8}, {24, 24}, {48, 2}, {56, 8}};
  std::vector<BlockUse> uses;
  scan_kernel_args(layout, args, blocks, uses);
  CHECK(as_set(uses) == std::set<std::pair<std::uint64_t, Access>>{{1, Access::touch}, {2, Access::touch}, {3, Access::touch}});
}

TEST_CASE("a parameter at an offset that is not a multiple of 8 is read at its aligned positions") {
  const BlockMap blocks = three_blocks();
  // A 12-byte struct at offset 4 (4-byte aligned): only bytes 4..11 of it sit on an 8-byte
  // boundary of the param buffer; a pointer there is found, the misaligned first 8 bytes are not.
  std::byte value[12] = {};
  const std::uint64_t inside = 0x7f0000600008;
  std::memcpy(value + 4, &inside, 8);
  void* args[] = {value};
  std::vector<BlockUse> uses;
  scan_kernel_args({{4, 12}}, args, blocks, uses);
  CHECK(as_set(uses) == std::set<std::pair<std::uint64_t, Access>>{{3, Access::touch}});
  uses.clear();
  std::memset(value, 0, sizeof value);
  std::memcpy(value, &inside, 8);  // misaligned in the buffer: a kernel cannot hold a pointer there
  scan_kernel_args({{4, 12}}, args, blocks, uses);
  CHECK(uses.empty());
}

TEST_CASE("known directions win over touch, and read plus write are both kept") {
  std::vector<BlockUse> uses;
  add_use(uses, 5, Access::touch);
  add_use(uses, 5, Access::read);
  CHECK(as_set(uses) == std::set<std::pair<std::uint64_t, Access>>{{5, Access::read}});
  add_use(uses, 5, Access::write);
  add_use(uses, 5, Access::touch);
  add_use(uses, 5, Access::write);
  CHECK(as_set(uses) == std::set<std::pair<std::uint64_t, Access>>{{5, Access::read}, {5, Access::write}});
  CHECK(uses.size() == 2);
}

TEST_CASE("driver cuLaunchKernel parameters: kernelParams and the extra buffer") {
  const BlockMap blocks = three_blocks();
  std::uint64_t p0 = 0x7f0000200000, p1 = 0x7f0000600000;
  void* kernel_params[] = {&p0, &p1};
  cuLaunchKernel_params params{};
  params.f = reinterpret_cast<CUfunction>(0x1234);
  params.hStream = reinterpret_cast<CUstream>(0x77);
  params.kernelParams = kernel_params;
  auto launch = decode_launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params);
  REQUIRE(launch);
  CHECK(launch->handle_kind == DecodedLaunch::Handle::function);
  CHECK(launch->handle == params.f);
  CHECK(launch->stream == 0x77);
  CHECK_FALSE(launch->runtime);
  const ParamLayout layout = {{0, 8}, {8, 8}};
  Op op;
  CHECK(attribute_launch(*launch, &layout, blocks, op));
  CHECK(as_set(op.blocks) == std::set<std::pair<std::uint64_t, Access>>{{2, Access::touch}, {3, Access::touch}});
  Op no_layout;
  CHECK_FALSE(attribute_launch(*launch, nullptr, blocks, no_layout));  // args without a layout: unreadable

  // The same launch with its arguments packed in `extra` needs no layout.
  std::vector<std::byte> packed;
  put<std::uint64_t>(packed, 0, 0x7f0000000800);
  put<std::uint64_t>(packed, 8, 99);
  std::size_t packed_size = packed.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                   CU_LAUNCH_PARAM_END};
  cuLaunchKernelEx_params ex{};
  CUlaunchConfig config{};
  config.hStream = reinterpret_cast<CUstream>(0x88);
  ex.config = &config;
  ex.f = params.f;
  ex.extra = extra;
  auto launch_ex = decode_launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &ex);
  REQUIRE(launch_ex);
  CHECK(launch_ex->stream == 0x88);
  Op op_ex;
  CHECK(attribute_launch(*launch_ex, nullptr, blocks, op_ex));
  CHECK(as_set(op_ex.blocks) == std::set<std::pair<std::uint64_t, Access>>{{1, Access::touch}});
  CHECK(extra_param_buffer(nullptr).empty());
}

TEST_CASE("runtime launches: host stubs for cudaLaunchKernel, kernels for CUDA 13's __cudaLaunchKernel") {
  std::uint64_t value = 0x7f0000000000;
  void* args[] = {&value};
  cudaLaunchKernel_v7000_params classic{};
  classic.func = reinterpret_cast<const void*>(0x4000);
  classic.args = args;
  classic.stream = reinterpret_cast<cudaStream_t>(0x9);
  auto a = decode_launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, &classic);
  REQUIRE(a);
  CHECK(a->handle_kind == DecodedLaunch::Handle::host_stub);
  CHECK(a->handle == classic.func);
  CHECK(a->args == args);
  CHECK(a->stream == 0x9);
  CHECK(a->runtime);

  DunderLaunchKernelParams dunder{};
  dunder.kernel = reinterpret_cast<cudaKernel_t>(0x5000);
  dunder.args = args;
  dunder.stream = reinterpret_cast<cudaStream_t>(0xa);
  auto b = decode_launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, &dunder);
  REQUIRE(b);
  CHECK(b->handle_kind == DecodedLaunch::Handle::kernel);
  CHECK(b->handle == reinterpret_cast<const void*>(0x5000));
  CHECK(b->stream == 0xa);

  cudaLaunchConfig_t config{};
  config.stream = reinterpret_cast<cudaStream_t>(0xb);
  cudaLaunchKernelExC_v11060_params exc{};
  exc.config = &config;
  exc.func = classic.func;
  exc.args = args;
  auto c = decode_launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, &exc);
  REQUIRE(c);
  CHECK(c->stream == 0xb);

  CHECK(is_launch_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000));
  CHECK_FALSE(is_launch_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
  CHECK(is_transfer_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
  CHECK_FALSE(decode_launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &classic));
  CHECK_FALSE(decode_launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, nullptr));
  // Every launch CBID the decoder knows is among those enabled.
  for (auto id : {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000}) {
    const auto& ids = runtime_callback_ids();
    CHECK(std::find(ids.begin(), ids.end(), static_cast<CUpti_CallbackId>(id)) != ids.end());
  }
}

TEST_CASE("copies and memsets: destination written, source read, direction from the addresses when unknown") {
  const BlockMap blocks = three_blocks();
  std::uint64_t host[4] = {};
  cudaMemcpyAsync_v3020_params h2d{reinterpret_cast<void*>(0x7f0000200100), host, 32, cudaMemcpyHostToDevice,
                                   reinterpret_cast<cudaStream_t>(0x3)};
  auto t = decode_transfer(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &h2d);
  REQUIRE(t);
  Op op;
  attribute_transfer(*t, blocks, op);
  CHECK(op.kind == OpKind::copy_h2d);
  CHECK(op.bytes == 32);
  CHECK(as_set(op.blocks) == std::set<std::pair<std::uint64_t, Access>>{{2, Access::write}});

  // cudaMemcpyDefault between two blocks, the copy spanning the end of one: both sides count.
  cudaMemcpyAsync_v3020_params d2d{reinterpret_cast<void*>(0x7f0000600000), reinterpret_cast<void*>(0x7f0000000f00),
                                   0x200, cudaMemcpyDefault, nullptr};
  auto u = decode_transfer(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &d2d);
  REQUIRE(u);
  CHECK_FALSE(u->kind);
  Op op2;
  attribute_transfer(*u, blocks, op2);
  CHECK(op2.kind == OpKind::copy_d2d);
  CHECK(as_set(op2.blocks) == std::set<std::pair<std::uint64_t, Access>>{{3, Access::write}, {1, Access::read}});

  cudaMemcpyAsync_v3020_params d2h{host, reinterpret_cast<void*>(0x7f0000600010), 16, cudaMemcpyDefault, nullptr};
  Op op3;
  attribute_transfer(*decode_transfer(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &d2h),
                     blocks, op3);
  CHECK(op3.kind == OpKind::copy_d2h);
  CHECK(as_set(op3.blocks) == std::set<std::pair<std::uint64_t, Access>>{{3, Access::read}});

  cuMemsetD32Async_params memset{0x7f0000000000, 0, 16, nullptr};
  auto m = decode_transfer(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, &memset);
  REQUIRE(m);
  CHECK(m->bytes == 64);  // 16 32-bit words
  Op op4;
  attribute_transfer(*m, blocks, op4);
  CHECK(op4.kind == OpKind::memset);
  CHECK(as_set(op4.blocks) == std::set<std::pair<std::uint64_t, Access>>{{1, Access::write}});
}

TEST_CASE("parameter layouts are read until the driver says there are no more") {
  const std::vector<ParamSlot> real = {{0, 8}, {8, 4}, {16, 24}};
  auto layout = read_param_layout([&](std::size_t i, std::size_t* offset, std::size_t* size) {
    if (i >= real.size()) return CUDA_ERROR_INVALID_VALUE;
    *offset = real[i].offset;
    *size = real[i].size;
    return CUDA_SUCCESS;
  });
  REQUIRE(layout);
  REQUIRE(layout->size() == 3);
  CHECK((*layout)[2].offset == 16);
  CHECK((*layout)[2].size == 24);
  // A kernel without parameters.
  auto empty = read_param_layout([](std::size_t, std::size_t*, std::size_t*) { return CUDA_ERROR_INVALID_VALUE; });
  REQUIRE(empty);
  CHECK(empty->empty());
  // The call itself unsupported: unknown, not "no parameters".
  CHECK_FALSE(read_param_layout([](std::size_t, std::size_t*, std::size_t*) { return CUDA_ERROR_NOT_SUPPORTED; }));
}
