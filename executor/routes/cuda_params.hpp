// A driver launch's parameters as the GPU launch route reads, copies and patches them.
//
// The driver takes parameters two ways: kernelParams (params[i] points to the value of
// parameter i, laid out by the offsets and sizes cuFuncGetParamInfo reports) or `extra` with
// CU_LAUNCH_PARAM_BUFFER_POINTER (one packed buffer, laid out already). Either way the kernel
// sees one packed buffer, and a pointer can sit at any 8-aligned offset of it: a parameter of
// its own, or a field of a struct passed by value. Every such word that points into a block
// the executor keeps state for becomes a LaunchRange (a touch: offsets and sizes say nothing
// of direction), remembered with its offset so that a replay can put another address there.
// Words that point nowhere DELTA manages are never changed.
#pragma once

#include "executor/launch.hpp"
#include "profiler/launch_params.hpp"
#include "profiler/directions/param_scan.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace delta::executor {

// The copy and the patch are the profiler's (the recorder replays launches too).
using profiler::ParamLayout;
using profiler::ParamSource;
using profiler::ParamCopy;
using profiler::copy_params;
using profiler::PatchedParams;

// The block containing an address, as [start, start + size); nullopt when DELTA does not
// manage one there.
using BlockLookup = std::function<std::optional<std::pair<DevicePtr, std::size_t>>(DevicePtr)>;

struct FoundPointers {
  std::vector<LaunchRange> ranges;   // ptr: the word's value; bytes: from there to the block's end
  std::vector<std::size_t> offsets;  // per range, the word's offset in the packed buffer
};

// false when the parameters cannot be read: kernel_params without a layout, or neither form.
// A launch with no parameters at all (both null) reads as true with nothing found.
bool find_block_pointers(const ParamSource& source, const BlockLookup& lookup, FoundPointers& out);

}  // namespace delta::executor
