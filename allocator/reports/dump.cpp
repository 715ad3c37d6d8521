// The allocator's JSON dump: settings, statistics, arenas with their blocks and mapped pages,
// and the event history. Documented in docs/allocator-dump.md.
#include "allocator/allocator_impl.hpp"

#include "allocator/reports/stats_json.hpp"

#include <nlohmann/json.hpp>

namespace delta {

using nlohmann::json;

json stats_to_json(const AllocatorStats& s) {
  return json{{"allocated_bytes", s.allocated_bytes}, {"allocated_peak", s.allocated_peak},
              {"requested_bytes", s.requested_bytes}, {"requested_peak", s.requested_peak},
              {"reserved_bytes", s.reserved_bytes},   {"reserved_peak", s.reserved_peak},
              {"active_bytes", s.active_bytes},       {"active_peak", s.active_peak},
              {"cached_bytes", s.cached_bytes},       {"alloc_count", s.alloc_count},
              {"free_count", s.free_count},           {"cache_hits", s.cache_hits},
              {"cache_misses", s.cache_misses},       {"segment_maps", s.segment_maps},
              {"segment_unmaps", s.segment_unmaps},   {"retries", s.retries},
              {"ooms", s.ooms},                       {"gc_runs", s.gc_runs},
              {"live_blocks", s.live_blocks},         {"free_blocks", s.free_blocks},
              {"pending_frees", s.pending_frees},     {"limit_bytes", s.limit_bytes},
              {"unmapped_bytes", s.unmapped_bytes},   {"spare_bytes", s.spare_bytes},
              {"fragmentation", s.fragmentation()}};
}

std::string CachingAllocator::Impl::to_json() const {
  static const char* state_names[] = {"free", "allocated", "binned", "pending"};
  static const char* pool_names[kPoolKinds] = {"small", "large", "pages", "packed"};
  AllocatorStats s = stats;
  s.cached_bytes = detail::cached_bytes_of(s);
  s.live_blocks = live.size();
  s.pending_frees = pending.size();
  s.spare_bytes = spare_handles.size() * page_size;
  json arenas = json::array();
  for (const auto& [stream, pools] : streams) {
    for (int pool = 0; pool < kPoolKinds; ++pool) {
      for (const auto& arena : pools->arenas[pool]) {
        json blocks = json::array();
        for (const detail::Block* b = arena->first; b; b = b->next) {
          json block{{"ptr", b->ptr}, {"size", b->size}, {"state", state_names[static_cast<int>(b->state)]}};
          if (b->state == detail::Block::State::allocated) block["requested"] = b->requested;
          if (b->unmapped_pages) block["unmapped_pages"] = b->unmapped_pages;
          if (b->away_bytes) block["away_bytes"] = b->away_bytes;
          blocks.push_back(std::move(block));
        }
        // Mapped pages as [first_index, count] runs.
        json runs = json::array();
        for (std::size_t i = 0; i < arena->touched_pages;) {
          if (!arena->pages[i].handle) { ++i; continue; }
          std::size_t j = i;
          while (j < arena->touched_pages && arena->pages[j].handle) ++j;
          runs.push_back({i, j - i});
          i = j;
        }
        arenas.push_back({{"stream", stream}, {"pool", pool_names[pool]},
                          {"base", arena->base}, {"va_size", arena->va_size},
                          {"page_size", arena->page_size}, {"mapped_pages", runs},
                          {"blocks", std::move(blocks)}});
      }
    }
  }
  json events = json::array();
  for (const AllocatorEvent& e : log.snapshot())
    events.push_back({{"kind", to_string(e.kind)}, {"t_ns", e.time_ns}, {"ptr", e.ptr}, {"size", e.size}, {"stream", e.stream}});
  json divisions = config.roundup_power2_divisions;
  json doc{
      {"format", "delta-allocator-dump"},
      {"version", 1},
      {"device", {{"kind", std::string(device->kind())}, {"ordinal", device->ordinal()},
                  {"total_bytes", device_total}, {"granularity", page_size}}},
      {"config", {{"max_split_size", config.max_split_size == SIZE_MAX ? json(nullptr) : json(config.max_split_size)},
                  {"roundup_power2_divisions", divisions},
                  {"garbage_collection_threshold", config.garbage_collection_threshold},
                  {"memory_fraction", config.memory_fraction},
                  {"hard_limit_bytes", config.hard_limit_bytes},
                  {"limit_bytes", limit}}},
      {"stats", stats_to_json(s)},
      {"arenas", std::move(arenas)},
      {"events_recorded", log.total_recorded()},
      {"events", std::move(events)},
  };
  return doc.dump();
}

}  // namespace delta
