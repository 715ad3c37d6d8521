#include "delta/polish.hpp"

#include "sim/stage_clock.hpp"

namespace delta::planner {

plan::Plan polish(const PlanRequest& request, plan::Plan plan, SimulationResult& judged, const Polish& polish,
                  PassSettings settings, bool early_copies) {
  StageScope stage("the polish");
  settings.refinement.early_copies = early_copies;
  settings.exchange.early_copies = early_copies;
  settings.retention.repair.early_copies = early_copies;
  judged = judge(request, plan);
  run_rounds(polish.rounds, request, plan, judged, settings);
  run_rounds(polish.then_rounds, request, plan, judged, settings);
  run_once(polish.last, request, plan, judged, settings);
  return plan;
}

}  // namespace delta::planner
