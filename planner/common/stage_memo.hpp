// Plans a planning stage made, kept for whoever asks for the same stage of the same request
// again. The fitting shares one memo between the plans it asks of one live budget
// (delta/fitting.cpp): those differ in a setting that only the last stages read
// (PlanRequest::state_swaps_within_link), so the stages before would make the same plans again,
// second for second (GPT2-XL float32 at 0.7 of its peak: 7 of the 20 plans the fitting made
// differed only so). And the portfolio makes stage 5's two sweeps side by side into it, which
// the stage then takes (Portfolio::polish_alternatives_side_by_side).
#pragma once

#include "common/request.hpp"
#include "sim/simulator.hpp"

#include <delta/plan.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace delta::planner {

class StageMemo {
 public:
  using Made = std::pair<plan::Plan, SimulationResult>;

  // The plan kept under `key`, made by `make` the first time it is asked for. A caller names
  // in `key` every setting the stage reads that may differ between the plans sharing the memo.
  // `make` runs outside the lock: two callers making the same key at once each make it (the
  // stages are deterministic, so both make the same plan) and the first kept stays.
  Made get(const std::string& key, const std::function<Made()>& make);

  std::size_t made() const;   // keys made
  std::size_t reused() const;  // times a kept plan was given

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Made> kept_;
  std::size_t reused_ = 0;
};

// A memo key for `stage` of `request`: names the stage and the settings every stage reads that
// the fitting varies between live plans (the budget, the smallest block moved, whether
// parameters move), so that a memo shared wider than one live budget cannot mix them up.
std::string stage_key(std::string_view stage, const PlanRequest& request);

}  // namespace delta::planner
