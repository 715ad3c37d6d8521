#include "sim/allocator_ledger.hpp"

#ifdef DELTA_PLANNER_HAVE_ALLOCATOR
#include <delta/allocator.hpp>
#endif

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace delta::planner {

#ifdef DELTA_PLANNER_HAVE_ALLOCATOR
namespace {

class CachingAllocatorLedger final : public AllocatorLedger {
 public:
  CachingAllocatorLedger(const std::string& gpu_profile, std::uint64_t budget_bytes) {
    SimOptions options;
    options.profile = gpu_profile;
    options.back_memory = false;
    if (budget_bytes > 0) {
      // The device itself is large; the budget is the allocator's hard limit, in whole 2 MiB
      // pages (rounded down: what it reserves never exceeds the budget).
      const std::uint64_t page = 2ull << 20;
      AllocatorConfig config;
      config.hard_limit_bytes = std::max(page, budget_bytes / page * page);
      allocator_ = std::make_unique<CachingAllocator>(make_sim_device(options), config);
    } else {
      allocator_ = std::make_unique<CachingAllocator>(make_sim_device(options), AllocatorConfig{});
    }
  }
  ~CachingAllocatorLedger() override {
    for (auto& [key, ptr] : live_) allocator_->deallocate(ptr);
  }

  void allocate(std::uint64_t key, std::uint64_t bytes) override {
    try {
      live_[key] = allocator_->allocate(bytes, 0);
    } catch (const OutOfMemoryError& e) {
      throw std::runtime_error(std::string("the caching allocator cannot place it (fragmentation): ") + e.what());
    }
  }
  void release(std::uint64_t key) override {
    auto it = live_.find(key);
    if (it == live_.end()) return;
    allocator_->deallocate(it->second);
    live_.erase(it);
  }
  std::uint64_t reserved() const override { return allocator_->stats().reserved_bytes; }
  std::uint64_t reserved_peak() const override { return allocator_->stats().reserved_peak; }

 private:
  std::unique_ptr<CachingAllocator> allocator_;
  std::unordered_map<std::uint64_t, void*> live_;
};

}  // namespace

std::unique_ptr<AllocatorLedger> make_allocator_ledger(const std::string& gpu_profile, std::uint64_t budget_bytes) {
  return std::make_unique<CachingAllocatorLedger>(gpu_profile, budget_bytes);
}
#else
std::unique_ptr<AllocatorLedger> make_allocator_ledger(const std::string&, std::uint64_t) { return nullptr; }
#endif

}  // namespace delta::planner
