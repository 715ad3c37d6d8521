#include "profiler/sources/wrapper_launches.hpp"

#include "profiler/sources/cupti_launch_decode.hpp"

#include <string>

namespace delta::profiler {
namespace {

thread_local std::optional<std::size_t> t_forwarding;

}  // namespace

std::optional<std::size_t> WrapperLaunches::record(const KernelCall& call) {
  if (recorder_.finished()) return std::nullopt;
  DecodedLaunch launch;
  launch.stream = call.stream;
  launch.args = call.params.kernel_params;
  launch.extra = call.params.extra;
  OpInfo info;
  info.name = call.name.empty() ? std::string("kernel") : std::string(call.name);
  info.kind = trace::OpKind::kernel;
  info.stream = call.stream;
  bool attributed = false;
  const std::optional<std::size_t> op = recorder_.add_op(std::move(info), [&](const BlockMap& blocks, trace::Op& o) {
    // A launch without parameters has nothing to attribute and is not "unattributed".
    attributed = attribute_launch(launch, call.params.layout, blocks, o) || (!launch.args && !launch.extra);
  });
  if (op) {
    launches_.fetch_add(1, std::memory_order_relaxed);
    if (!attributed) unattributed_.fetch_add(1, std::memory_order_relaxed);
  }
  return op;
}

std::optional<std::size_t> WrapperLaunches::current_op() noexcept { return t_forwarding; }

WrapperLaunches::Forwarding::Forwarding(std::optional<std::size_t> op) noexcept : previous_(t_forwarding) {
  t_forwarding = op;
}

WrapperLaunches::Forwarding::~Forwarding() { t_forwarding = previous_; }

}  // namespace delta::profiler
