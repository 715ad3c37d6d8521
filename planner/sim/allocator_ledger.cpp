#include "sim/allocator_ledger.hpp"

#include "sim/ledger_device.hpp"

#ifdef DELTA_PLANNER_HAVE_ALLOCATOR
#include <delta/allocator.hpp>
#endif

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace delta::planner {

#ifdef DELTA_PLANNER_HAVE_ALLOCATOR
namespace {

class CachingAllocatorLedger final : public AllocatorLedger {
 public:
  CachingAllocatorLedger(const std::string& gpu_profile, std::uint64_t budget_bytes, bool packed_moves)
      : packed_moves_(packed_moves) {
    // The allocator's books alone: the sim device's checks and tables cost more than the
    // allocator itself, thousands of plans over (test_ledger_device holds the two alike).
    const std::shared_ptr<Device> device = make_ledger_device(gpu_profile, &clock_);
    if (budget_bytes > 0) {
      // The device itself is large; the budget is the allocator's hard limit, in whole 2 MiB
      // pages (rounded down: what it reserves never exceeds the budget).
      const std::uint64_t page = 2ull << 20;
      AllocatorConfig config;
      config.hard_limit_bytes = std::max(page, budget_bytes / page * page);
      allocator_ = std::make_unique<CachingAllocator>(device, config);
    } else {
      allocator_ = std::make_unique<CachingAllocator>(device, AllocatorConfig{});
    }
  }
  ~CachingAllocatorLedger() override {
    for (auto& [key, ptr] : live_) allocator_->deallocate(ptr);
  }

  void allocate(std::uint64_t key, std::uint64_t bytes, bool keep_cache) override {
    const WhenShort when_short = keep_cache ? WhenShort::fail : WhenShort::flush_then_fail;
    try {
      if (kept_.erase(key)) return;  // live across the step boundary: where the last step left it
      if (auto it = live_.find(key); it != live_.end() && moved_.count(key)) {
        // Back at its address: what evict() unmapped is mapped again.
        if (auto hole = holes_.find(key); hole != holes_.end()) {
          allocator_->map_pages(it->second, hole->second.first, hole->second.second, when_short);
          holes_.erase(hole);
        }
        return;
      }
      if (live_.count(key)) throw std::logic_error("allocator ledger: key " + std::to_string(key) + " allocated twice");
      // As the executor places them: moved blocks on pages of their own, or packed side by side.
      const bool moved = moved_.count(key) > 0;
      const bool packed = moved && packed_moves_;
      std::uint8_t group = 0;
      if (packed)
        if (auto g = groups_.find(key); g != groups_.end()) group = g->second;
      const Placement placement{.own_pages = moved, .packed = packed, .group = group, .when_short = when_short};
      live_[key] = allocator_->allocate(bytes, 0, placement);
      if (placement.own_pages) mapped_[key] = allocator_->block_size(live_[key]).value_or(bytes);
    } catch (const OutOfMemoryError& e) {
      throw std::runtime_error(std::string("the caching allocator cannot place it (fragmentation): ") + e.what());
    }
  }
  void release(std::uint64_t key) override {
    auto it = live_.find(key);
    if (it == live_.end()) return;
    allocator_->deallocate(it->second);
    live_.erase(it);
    holes_.erase(key);
    kept_.erase(key);
  }
  void mark_moved(std::uint64_t key, std::uint8_t group) override {
    moved_.insert(key);
    if (group != 0) groups_[key] = group;
  }
  bool evict(std::uint64_t key, std::uint64_t bytes) override {
    auto it = live_.find(key);
    if (it == live_.end() || !moved_.count(key)) return false;
    const std::uint64_t size = mapped_.at(key);
    const std::uint64_t leaving = std::min(size, (bytes + page_ - 1) / page_ * page_);
    std::uint64_t from = size - leaving;
    if (from != 0) {  // a part of it, from a page boundary (as the executor moves it)
      const auto start = reinterpret_cast<std::uintptr_t>(it->second);
      from = std::min<std::uint64_t>(size, (start + from + page_ - 1) / page_ * page_ - start);
    }
    // Pages already away (a partial swap before) stay away; only what is still mapped goes.
    const std::uint64_t mapped_end = holes_.count(key) ? holes_[key].first : size;
    if (from >= mapped_end) return true;  // nothing more leaves (a part within its last page)
    allocator_->unmap_pages(it->second, from, mapped_end - from);
    holes_[key] = {from, size - from};
    return true;
  }
  std::uint64_t reserved() const override { return allocator_->stats().reserved_bytes; }
  std::uint64_t unused() const override { return allocator_->unused_page_bytes(); }
  std::uint64_t reserved_peak() const override { return allocator_->stats().reserved_peak; }

  void next_step(std::span<const std::uint64_t> kept) override {
    std::unordered_set<std::uint64_t> keep(kept.begin(), kept.end());
    std::vector<std::uint64_t> leaving;
    for (const auto& [key, ptr] : live_)
      if (!keep.count(key)) leaving.push_back(key);
    // As the program frees them: in block order (the trace's), whatever order the map keeps.
    std::sort(leaving.begin(), leaving.end());
    for (std::uint64_t key : kept) {
      auto it = live_.find(key);
      if (it == live_.end())
        throw std::logic_error("allocator ledger: key " + std::to_string(key) + " kept across the step boundary is not allocated");
      if (auto hole = holes_.find(key); hole != holes_.end()) {  // brought back before the step ends
        allocator_->map_pages(it->second, hole->second.first, hole->second.second);
        holes_.erase(hole);
      }
    }
    for (std::uint64_t key : leaving) release(key);
    kept_ = std::move(keep);
  }

  void check_invariants() const override {
    allocator_->check_invariants();
    const auto broken = [](std::uint64_t key, const std::string& rule) {
      throw std::logic_error("allocator ledger: key " + std::to_string(key) + ": " + rule);
    };
    for (std::uint64_t key : kept_)
      if (!live_.count(key)) broken(key, "kept across the step boundary but not allocated");
    for (const auto& [key, ptr] : live_) {
      const std::optional<std::size_t> size = allocator_->block_size(ptr);
      if (!size) broken(key, "its pointer is not a block of the allocator");
      if (!moved_.count(key)) {
        if (holes_.count(key)) broken(key, "has pages unmapped but is not placed on pages of its own");
        continue;
      }
      auto mapped = mapped_.find(key);
      if (mapped == mapped_.end()) broken(key, "moved and allocated, with no mapped size");
      auto hole = holes_.find(key);
      const std::uint64_t present = hole == holes_.end() ? mapped->second : hole->second.first;
      if (hole != holes_.end()) {
        if (hole->second.first + hole->second.second != mapped->second) broken(key, "its part away does not end at its end");
        if (hole->second.second == 0) broken(key, "counted away with nothing away");
        // On pages of its own, what is away is unmapped; packed, a page it shares with a
        // block present stays mapped (the allocator's invariants hold the pages' counts).
        if (!packed_moves_ && allocator_->pages_mapped(ptr, hole->second.first, page_)) broken(key, "a page counted away is mapped");
      }
      if (present > 0 && !allocator_->pages_mapped(ptr, 0, present)) broken(key, "a page counted present is not mapped");
    }
  }

  void set_clock(LedgerClock* clock) override { clock_.set(clock); }

 private:
  bool packed_moves_ = false;
  LedgerClockSlot clock_;  // the device reads it; declared first, so it outlives the allocator
  std::unique_ptr<CachingAllocator> allocator_;
  std::unordered_map<std::uint64_t, void*> live_;
  // Executor placement: moved keys, their mapped size (whole pages), and the tail unmapped
  // now (offset, bytes).
  std::uint64_t page_ = 2ull << 20;
  std::unordered_set<std::uint64_t> moved_;
  std::unordered_map<std::uint64_t, std::uint8_t> groups_;  // packed placement groups other than 0
  std::unordered_map<std::uint64_t, std::uint64_t> mapped_;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> holes_;
  // Live across the last step boundary (next_step) and not yet allocated by the new step.
  std::unordered_set<std::uint64_t> kept_;
};

}  // namespace

std::unique_ptr<AllocatorLedger> make_allocator_ledger(const std::string& gpu_profile, std::uint64_t budget_bytes,
                                                       bool packed_moves) {
  return std::make_unique<CachingAllocatorLedger>(gpu_profile, budget_bytes, packed_moves);
}
#else
std::unique_ptr<AllocatorLedger> make_allocator_ledger(const std::string&, std::uint64_t, bool) { return nullptr; }
#endif

}  // namespace delta::planner
