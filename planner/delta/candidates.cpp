#include "delta/candidates.hpp"

#include <algorithm>

namespace delta::planner {

void sweep_tightening(const PlanRequest& request, const SweepSetting& setting, StateSwaps state_swaps,
                      const std::function<void(plan::Plan& plan, const SimulationResult& verdict)>& visit) {
  // Without swaps every plan fails where regeneration alone cannot fit: none is made.
  if (!setting.swap && regeneration_alone_cannot_fit(request)) return;
  DeltaOptions options;
  options.discard_dead = true;
  options.exposed_swap_factor = setting.factor;
  options.max_chain = setting.chain;
  options.allow_swap = setting.swap;
  options.policy = setting.policy;
  options.hide_prefetch = setting.policy != Policy::delta_public;  // that rule fetches at the use
  options.state_swaps = state_swaps;
  PlanRequest tighter = request;
  for (int round = 0; round < 3; ++round) {
    plan::Plan plan = plan_with_sweep(tighter, options);
    plan.budget_bytes = request.budget_bytes;
    plan.budget_ratio = request.budget_ratio;
    SimulationResult result = judge(request, plan);
    const bool feasible = result.feasible;
    visit(plan, result);
    if (feasible) break;
    tighter.budget_bytes = static_cast<std::uint64_t>(double(tighter.budget_bytes) * 0.97);
  }
}

std::vector<RematOptions> remat_settings(std::size_t count, std::size_t revived, std::size_t siblings, std::size_t shared_inputs,
                                        std::size_t restarts) {
  // Siblings are rebuilt together when needed within 0.5% of the step of each other (the
  // DTR transformer's dropout output and mask: four ops apart).
  constexpr double kSiblingWindow = 0.005;
  struct Setting {
    RematScore score;
    double headroom;
    int depth;
    double weight;
    double children = 0;
    bool operator==(const Setting&) const = default;
  };
  constexpr RematScore next = RematScore::until_next_use, last = RematScore::since_last_use;
  std::vector<Setting> settings = {{last, 0, 1, 0.5}, {next, 0, 8, 0.5}, {last, 0, 8, 0.5}, {last, 0, 1, 2}, {next, 2, 8, 0.5},
                                   {last, 4, 8, 2},   {next, 0, 1, 1},   {last, 8, 8, 1},   {next, 4, 1, 2}};
  const std::vector<Setting> first(settings);
  for (double children : {32.0, 8.0})
    for (Setting x : first) {
      x.children = children;
      settings.push_back(x);
    }
  for (RematScore score : {next, last})
    for (double headroom : {0.0, 2.0, 4.0, 8.0})
      for (int depth : {1, 8})
        for (double weight : {0.5, 1.0, 2.0})
          for (double children : {0.0, 32.0, 8.0}) {
            const Setting x{score, headroom, depth, weight, children};
            if (std::find(settings.begin(), settings.end(), x) == settings.end()) settings.push_back(x);
          }
  std::vector<RematOptions> out;
  for (std::size_t k = 0; k < std::min(count, settings.size()); ++k) {
    RematOptions options;
    options.score = settings[k].score;
    options.restore_headroom = settings[k].headroom;
    options.rebuild_depth = settings[k].depth;
    options.distance_weight = settings[k].weight;
    options.children_weight = settings[k].children;
    // Plans again with what stranded an op pinned: most failing settings that can be rescued
    // are within four (unet at 0.3: 1.80 to 1.51).
    options.max_restarts = restarts;
    out.push_back(options);
  }
  // The most useful settings again with freed inputs revived rather than rebuilt in every
  // replay, each with the revived inputs' cost shared among the blocks made from them and
  // without (densenet121 at 0.5: 1.123 to 1.093 and 1.100; at 0.3: 1.244 to 1.203 and 1.195).
  // Elsewhere revivals hold memory that drops then pay for, so the plain settings run too.
  const std::size_t plain = out.size();
  for (std::size_t k = 0; k < std::min(revived, 2 * plain); ++k) {
    RematOptions options = out[k / 2];
    options.revive_inputs = true;
    options.share_revived_cost = k % 2 == 0;
    out.push_back(options);
  }
  // The most useful settings, plain and with revivals, again with siblings rebuilt together:
  // a dropout's mask comes back with its output when both are dropped (the DTR transformer at
  // 0.4: 1.0491 to 1.0449; GPT2-XL at 0.5, fitted: 1.044 to 1.036). Elsewhere (resnet32's
  // batch norm writes its statistics beside its output) the siblings hold memory that other
  // drops then pay for, so these are a family of their own, and where few plans are polished
  // the best of each family is (a faster sibling plan can polish worse: GPT2-large bfloat16
  // at batch 74 under an H200, 1.198 with one plan polished, 1.200 with the sibling plan
  // alone).
  const std::size_t revivals = out.size() - plain;
  for (std::size_t k = 0; k < std::min(siblings, plain); ++k)
    for (const std::size_t from : {k, plain + k}) {
      if (from >= plain && from - plain >= revivals) continue;
      RematOptions options = out[from];
      options.sibling_window = kSiblingWindow;
      out.push_back(options);
    }
  // Plain settings again, without siblings and with, counting a dropped input's rebuild as
  // shared with the blocks that need it, not at all or at half (delta_remat.hpp): on GPT-2 in
  // bfloat16 they drop the GELU's pieces with its first projection rather than attention
  // scores (GPT2-large at batch 56 under an H200, fitted: 1.148 to 1.131, from the weight 0;
  // at batch 80, 1.211 to 1.199, from the weight 0.5). A family of their own again. The third
  // setting first: it scores by staleness and looks 8 levels deep, where sharing matters most
  // (1.131 at batch 56, against 1.136 to 1.148 from each of the others of the first six at
  // weight 0); then the others in their order. The short traces do without: the DTR logs gain
  // nothing, and resnet32 at 0.2 polishes to 1.1685 from the extra finalists rather than
  // 1.1676.
  std::vector<std::size_t> order;
  if (plain > 2) order.push_back(2);
  for (std::size_t k = 0; k < plain; ++k)
    if (k != 2) order.push_back(k);
  for (std::size_t k = 0; k < std::min(shared_inputs, plain); ++k)
    for (double weight : {0.0, 0.5}) {
      RematOptions options = out[order[k]];
      options.dropped_input_weight = weight;
      out.push_back(options);
      options.sibling_window = kSiblingWindow;
      out.push_back(options);
    }
  return out;
}

}  // namespace delta::planner
