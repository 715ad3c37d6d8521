// DELTA's caching allocator on a simulated device, as a replay target.
#pragma once

#include "replay/replay_target.hpp"

#include <delta/allocator.hpp>
#include <delta/device.hpp>

#include <memory>
#include <unordered_map>

namespace delta::replay {

struct DeltaTargetOptions {
  std::string gpu = "h200";        // sim GPU profile
  std::size_t capacity_bytes = 0;  // 0: the profile's memory
  AllocatorConfig allocator;       // defaults match PyTorch's
};

class DeltaTarget : public ReplayTarget {
 public:
  explicit DeltaTarget(const DeltaTargetOptions& options);
  ~DeltaTarget() override;

  std::string name() const override { return "delta"; }
  std::optional<std::uintptr_t> allocate(std::size_t size, std::uint64_t stream) override;
  void free(std::uintptr_t address) override;
  TargetStats stats() const override;
  void check_invariants() const override;

  CachingAllocator& allocator() { return *allocator_; }

 private:
  StreamHandle device_stream(std::uint64_t stream);

  std::shared_ptr<Device> device_;
  std::unique_ptr<CachingAllocator> allocator_;
  // Streams of the trace mapped to sim streams; trace stream 0 is the default stream.
  std::unordered_map<std::uint64_t, StreamHandle> streams_;
};

}  // namespace delta::replay
