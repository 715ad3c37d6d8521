#include "common/stage_memo.hpp"

#include <fmt/format.h>

namespace delta::planner {

StageMemo::Made StageMemo::get(const std::string& key, const std::function<Made()>& make) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = kept_.find(key); it != kept_.end()) {
      ++reused_;
      return it->second;
    }
  }
  Made made = make();
  std::lock_guard lock(mutex_);
  return kept_.try_emplace(key, std::move(made)).first->second;
}

std::size_t StageMemo::made() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

std::size_t StageMemo::reused() const {
  std::lock_guard lock(mutex_);
  return reused_;
}

std::string stage_key(std::string_view stage, const PlanRequest& request) {
  return fmt::format("{}; budget {} bytes; blocks of {} bytes or more moved, {} or more of those live before the step; "
                     "parameters {}",
                     stage, request.budget_bytes, request.min_moved_bytes, request.min_moved_persistent_bytes,
                     request.move_parameters ? "moved" : "resident");
}

}  // namespace delta::planner
