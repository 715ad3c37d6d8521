#include "executor/routes/cuda_params.hpp"

#include "profiler/sources/cupti_launch_decode.hpp"


namespace delta::executor {

bool find_block_pointers(const ParamSource& source, const BlockLookup& lookup, FoundPointers& out) {
  auto visit = [&](std::size_t offset, std::uint64_t word) {
    const auto block = lookup(static_cast<DevicePtr>(word));
    if (!block) return;
    const DevicePtr end = block->first + block->second;
    out.ranges.push_back({static_cast<DevicePtr>(word), static_cast<std::size_t>(end - word), true, true});
    out.offsets.push_back(offset);
  };
  if (source.kernel_params != nullptr) {
    if (source.layout == nullptr) return false;
    profiler::for_each_arg_word(*source.layout, source.kernel_params, visit);
    return true;
  }
  if (source.extra != nullptr) {
    const auto buffer = profiler::extra_param_buffer(source.extra);
    if (buffer.data() == nullptr) return false;
    profiler::for_each_param_word(buffer, visit);
    return true;
  }
  return true;  // no parameters
}

}  // namespace delta::executor
