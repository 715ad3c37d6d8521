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

// An allocator on an 8 GiB simulated GPU that stores no bytes: only the allocator is timed.
std::unique_ptr<delta::CachingAllocator> sim_allocator(const delta::AllocatorConfig& config = {}) {
  delta::SimOptions options;
  options.capacity_bytes = std::size_t(8) << 30;
  options.back_memory = false;
  return std::make_unique<delta::CachingAllocator>(delta::make_sim_device(options), config);
}

// Times allocate+free pairs of the sizes `size_of(i)` gives for i = 0, 1, 2, ...
template <typename SizeOf>
void time_pairs(benchmark::State& state, delta::CachingAllocator& allocator, SizeOf size_of) {
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = allocator.allocate(size_of(i++), 0);
    benchmark::DoNotOptimize(p);
    allocator.deallocate(p);
  }
  state.SetItemsProcessed(state.iterations());
}

std::size_t cycled_size(std::size_t i) { return kSizes[i & 15]; }

void BM_delta_pair(benchmark::State& state) {
  auto allocator = sim_allocator();
  for (std::size_t size : kSizes) allocator->deallocate(allocator->allocate(size, 0));  // warm the cache
  time_pairs(state, *allocator, cycled_size);
  auto stats = allocator->stats();
  state.counters["hit_rate"] = double(stats.cache_hits) / double(stats.alloc_count);
}
BENCHMARK(BM_delta_pair);

// The same with the event history on (DELTA_EVENT_LOG), to show what recording it costs.
void BM_delta_pair_with_history(benchmark::State& state) {
  delta::AllocatorConfig config;
  config.event_log_capacity = 1 << 16;
  auto allocator = sim_allocator(config);
  time_pairs(state, *allocator, cycled_size);
}
BENCHMARK(BM_delta_pair_with_history);

// Large blocks (above the small pool) take the best-fit path instead of the bins.
void BM_delta_pair_large(benchmark::State& state) {
  auto allocator = sim_allocator();
  time_pairs(state, *allocator, [](std::size_t i) { return (2 + (i & 7)) << 20; });
}
BENCHMARK(BM_delta_pair_large);

}  // namespace

BENCHMARK_MAIN();
