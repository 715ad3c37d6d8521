// Cached malloc+free pair latency on one thread: DELTA against glibc on the same size
// sequence, measured in the same run. scripts/bench turns the medians into ratios.
#include <delta/allocator.hpp>
#include <delta/sim_device.hpp>

#include <benchmark/benchmark.h>

#include <array>
#include <cstdlib>
#include <memory>

namespace {

// Sizes of a typical training step's small and medium tensors (bytes), cycled through.
constexpr std::array<std::size_t, 16> kSizes = {512,   1024,   4096,   8192,    16384,   65536,  131072, 262144,
                                                 524288, 786432, 1048576, 2048,  3072,    49152,  200000, 1000};

void BM_glibc_pair(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = std::malloc(kSizes[i++ & 15]);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_glibc_pair);

void BM_delta_pair(benchmark::State& state) {
  delta::SimOptions options;
  options.capacity_bytes = std::size_t(8) << 30;
  options.back_memory = false;
  auto device = delta::make_sim_device(options);
  delta::CachingAllocator allocator(device, {});
  for (std::size_t size : kSizes) allocator.deallocate(allocator.allocate(size, 0));  // warm the cache
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = allocator.allocate(kSizes[i++ & 15], 0);
    benchmark::DoNotOptimize(p);
    allocator.deallocate(p);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["hit_rate"] = double(allocator.stats().cache_hits) / double(allocator.stats().alloc_count);
}
BENCHMARK(BM_delta_pair);

// The same with the event history on (DELTA_EVENT_LOG), to show what recording it costs.
void BM_delta_pair_with_history(benchmark::State& state) {
  delta::SimOptions options;
  options.capacity_bytes = std::size_t(8) << 30;
  options.back_memory = false;
  auto device = delta::make_sim_device(options);
  delta::AllocatorConfig config;
  config.event_log_capacity = 1 << 16;
  delta::CachingAllocator allocator(device, config);
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = allocator.allocate(kSizes[i++ & 15], 0);
    benchmark::DoNotOptimize(p);
    allocator.deallocate(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_delta_pair_with_history);

// Large blocks (above the small pool) take the best-fit path instead of the bins.
void BM_delta_pair_large(benchmark::State& state) {
  delta::SimOptions options;
  options.capacity_bytes = std::size_t(8) << 30;
  options.back_memory = false;
  auto device = delta::make_sim_device(options);
  delta::CachingAllocator allocator(device, {});
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = allocator.allocate((2 + (i++ & 7)) << 20, 0);
    benchmark::DoNotOptimize(p);
    allocator.deallocate(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_delta_pair_large);

}  // namespace

BENCHMARK_MAIN();
