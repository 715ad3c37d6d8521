// A model of PyTorch's native CUDA caching allocator policy (c10/cuda/CUDACachingAllocator.cpp,
// default settings): the same rounding, pools, segment sizes, best-fit order, splitting,
// merging and out-of-memory recovery, over a simulated cudaMalloc with a capacity. It holds
// no memory; it only decides where blocks would go, so a trace can be replayed under the
// native policy on a machine without a GPU.
#pragma once

#include "replay/replay_target.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace delta::replay {

// The native allocator's constants.
inline constexpr std::size_t kMinBlockSize = 512;                // every size rounds to this
inline constexpr std::size_t kSmallSize = std::size_t{1} << 20;   // largest small request
inline constexpr std::size_t kSmallBuffer = std::size_t{2} << 20; // small pool segment size
inline constexpr std::size_t kMinLargeAlloc = std::size_t{10} << 20;  // below: 20 MiB segments
inline constexpr std::size_t kLargeBuffer = std::size_t{20} << 20;
inline constexpr std::size_t kRoundLarge = std::size_t{2} << 20;  // larger: rounded to this

struct NativeModelConfig {
  std::size_t capacity_bytes = 0;          // what cudaMalloc can hand out in total
  std::size_t max_split_size = SIZE_MAX;   // max_split_size_mb; unset by default
};

struct NativeModelStats : TargetStats {
  std::size_t requested_bytes = 0;
  std::size_t segments = 0;
  std::uint64_t device_mallocs = 0, device_frees = 0;  // cudaMalloc / cudaFree calls that succeeded
  std::uint64_t retries = 0;                            // allocations retried after freeing the cache
};

// One block as the model lays it out, for tests and reports.
struct NativeBlockView {
  std::uintptr_t address;
  std::size_t size;
  bool allocated;
};
struct NativeSegmentView {
  std::uintptr_t address;
  std::size_t size;
  bool small_pool;
  std::uint64_t stream;
  std::vector<NativeBlockView> blocks;  // by address
};

class NativeCachingModel : public ReplayTarget {
 public:
  explicit NativeCachingModel(NativeModelConfig config);
  ~NativeCachingModel() override;
  NativeCachingModel(const NativeCachingModel&) = delete;
  NativeCachingModel& operator=(const NativeCachingModel&) = delete;

  std::string name() const override { return "native-model"; }
  // size 0 gives address 0 and changes nothing, as the native allocator does.
  std::optional<std::uintptr_t> allocate(std::size_t size, std::uint64_t stream) override;
  // Throws std::invalid_argument for an address that is not a live block.
  void free(std::uintptr_t address) override;
  TargetStats stats() const override { return stats_; }
  void check_invariants() const override;

  const NativeModelStats& detailed_stats() const { return stats_; }
  void empty_cache();  // torch.cuda.empty_cache(): release every unsplit free segment
  std::vector<NativeSegmentView> segments() const;
  std::optional<std::size_t> block_size(std::uintptr_t address) const;

  static std::size_t round_size(std::size_t size);
  static std::size_t allocation_size(std::size_t rounded);  // segment size cudaMalloc is asked for

 private:
  struct Block;
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BySizeThenAddress>;

  Pool& pool_for(bool small) { return small ? small_free_ : large_free_; }
  Block* take_free_block(Pool& pool, std::uint64_t stream, std::size_t size);
  Block* device_malloc(std::size_t alloc_size, bool small, std::uint64_t stream);
  bool release_available_cached_blocks(Pool& pool, std::uint64_t stream, std::size_t size);
  void release_cached_blocks();
  void release_segment(Block* block);
  bool should_split(const Block* block, std::size_t size) const;
  void merge_into(Block* block, Block* neighbour, Pool& pool);

  NativeModelConfig config_;
  Pool small_free_, large_free_;
  struct Segment {
    Block* head;  // the block at the segment's start address
    std::size_t size;
    bool small;
    std::uint64_t stream;
  };
  std::unordered_map<std::uintptr_t, Block*> live_;  // allocated blocks by address
  std::map<std::uintptr_t, Segment> segments_;       // every cudaMalloc'ed segment by address
  std::uintptr_t next_segment_address_;
  NativeModelStats stats_;
};

}  // namespace delta::replay
