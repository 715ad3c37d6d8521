#include "tools/execute/program_shapes.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace delta::execute {

std::vector<ShapeRun> parse_shapes(const std::string& text) {
  std::vector<ShapeRun> runs;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const std::size_t x = item.find('x');
    ShapeRun run;
    try {
      if (x == std::string::npos) throw std::invalid_argument("no x");
      std::size_t used = 0;
      run.scale = std::stod(item.substr(0, x), &used);
      if (used != x) throw std::invalid_argument("scale");
      const std::string count = item.substr(x + 1);
      run.iterations = std::stoul(count, &used);
      if (used != count.size() || count.empty() || count[0] == '-') throw std::invalid_argument("count");
    } catch (const std::exception&) {
      throw std::invalid_argument("--shapes: '" + item + "' is not SCALExCOUNT (e.g. 0.5x4)");
    }
    if (!(run.scale > 0 && run.scale <= 4)) throw std::invalid_argument("--shapes: the scale of '" + item + "' is not in (0, 4]");
    if (run.iterations == 0) throw std::invalid_argument("--shapes: '" + item + "' runs no iteration");
    runs.push_back(run);
    start = end + 1;
  }
  return runs;
}

executor::StepProgram scaled_program(const executor::StepProgram& program, double scale) {
  executor::StepProgram out = program;
  if (scale == 1.0) return out;
  for (executor::StepBlock& block : out.blocks) {
    if (block.persistent || block.to_end) continue;  // the state, and what crosses the boundary
    const auto scaled = static_cast<std::uint64_t>(std::ceil(double(block.size) * scale / 512.0)) * 512;
    block.size = std::max<std::uint64_t>(scaled, 512);
  }
  for (executor::StepOp& op : out.ops)
    op.duration_ns = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(double(op.duration_ns) * scale)));
  return out;
}

}  // namespace delta::execute
