// The linear optimum in op names and categories (relaxation.hpp).
#include "bound/relaxation.hpp"

#include <algorithm>

namespace delta::planner::relaxation {

BoundExplanation explain(const std::vector<double>& values, const std::vector<Gap>& gaps, const std::vector<Columns>& columns,
                         const std::vector<Checkpoint>& checkpoints,
                         const std::map<std::uint32_t, std::size_t>& replay_column, const std::vector<double>& excess,
                         const TraceIndex& index) {
  constexpr double kTiny = 1e-6;
  BoundExplanation out;
  auto op_name = [&](std::uint32_t op) { return index.trace().ops[op].name; };
  auto made_by = [&](std::uint32_t block) {
    const BlockInfo& info = index.block(block);
    return info.producer >= 0 ? op_name(static_cast<std::uint32_t>(info.producer)) : std::string(trace::to_string(info.category));
  };
  for (const auto& [op, column] : replay_column) {
    if (values[column] <= kTiny) continue;
    out.replay_ms[op_name(op)] += values[column] * double(index.duration(op)) / 1e6;
    out.replay_count[op_name(op)] += values[column];
  }
  out.peak_op = static_cast<std::uint32_t>(std::max_element(excess.begin(), excess.end()) - excess.begin());
  out.excess_bytes = excess[out.peak_op];
  // The checkpoint nearest the peak (the op in most excess is always one).
  const Checkpoint* at = nullptr;
  for (const Checkpoint& c : checkpoints)
    if (c.op == out.peak_op) at = &c;
  if (!at) return out;
  for (const Checkpoint::Share& share : at->shares) {
    const double swapped = values[share.swap] > kTiny ? values[share.swap] : 0.0;
    const double regenerated = share.regen && values[share.regen] > kTiny ? values[share.regen] : 0.0;
    if (swapped <= 0 && regenerated <= 0) continue;
    // A share of blocks alike is the same share of each of them.
    std::vector<std::size_t> members{share.gap};
    members.insert(members.end(), share.alike.begin(), share.alike.end());
    for (std::size_t g : members) {
      const double size = double(index.block(gaps[g].block).size);
      const std::string name = made_by(gaps[g].block);
      if (swapped > 0) out.swapped_bytes[name] += swapped * size;
      if (regenerated > 0) out.regenerated_bytes[name] += regenerated * size;
      out.peak_blocks.push_back({index.block(gaps[g].block).id, swapped, regenerated});
    }
  }
  for (std::size_t g : at->whole)
    if (values[columns[g].away] > kTiny)
      out.away_bytes[made_by(gaps[g].block)] += values[columns[g].away] * double(index.block(gaps[g].block).size);
  return out;
}

std::vector<BoundExplanation::StepPoint> along_step(const std::vector<double>& values, const std::vector<Gap>& gaps,
                                                    const std::vector<Columns>& columns, const std::vector<double>& excess,
                                                    std::uint32_t peak_op, const TraceIndex& index) {
  constexpr std::size_t kPoints = 8;
  constexpr double kTiny = 1e-6;
  std::vector<std::uint32_t> over;
  for (std::uint32_t i = 0; i < excess.size(); ++i)
    if (excess[i] > 0) over.push_back(i);
  std::vector<std::uint32_t> points = spread(over, kPoints);
  points.push_back(peak_op);
  points = spread(points, points.size());  // sorted, each once
  std::vector<BoundExplanation::StepPoint> out;
  for (std::uint32_t op : points) {
    BoundExplanation::StepPoint point;
    point.op = op;
    point.excess_bytes = excess[op];
    for (std::size_t g = 0; g < gaps.size(); ++g) {
      if (gaps[g].after >= op || op >= gaps[g].before) continue;
      const double away = values[columns[g].away];
      if (away <= kTiny) continue;
      const BlockInfo& info = index.block(gaps[g].block);
      const double rebuilt = columns[g].regen ? std::min(away, values[columns[g].regen]) : 0.0;
      const std::string category = trace::to_string(info.category);
      if (rebuilt > kTiny) point.regenerated_bytes[category] += rebuilt * double(info.size);
      if (away - rebuilt > kTiny) point.swapped_bytes[category] += (away - rebuilt) * double(info.size);
    }
    out.push_back(std::move(point));
  }
  return out;
}

}  // namespace delta::planner::relaxation
