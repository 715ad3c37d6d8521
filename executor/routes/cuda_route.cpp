#include "executor/routes/cuda_route.hpp"

#include "logging/log.hpp"
#include "profiler/sources/cupti_kernel_params.hpp"

#include <delta/allocator.hpp>

#include <nlohmann/json.hpp>

#include <mutex>
#include <stdexcept>
#include <vector>

namespace delta::executor {

thread_local CUresult CudaLaunchRoute::last_refusal_ = CUDA_SUCCESS;

std::string to_json(const RouteStats& s) {
  return nlohmann::json{{"launches", s.launches},   {"transfers", s.transfers}, {"unreadable", s.unreadable},
                        {"pointer_words", s.pointer_words}, {"refused", s.refused}, {"pins", s.pins},
                        {"functions", s.functions}}
      .dump();
}

CudaLaunchRoute::CudaLaunchRoute(EntryPoints& entry, FunctionQueries queries)
    : entry_(entry), queries_(queries), lookup_([&entry](DevicePtr p) { return entry.block_containing(p); }) {}

StreamHandle CudaLaunchRoute::stream_of(CUstream stream, bool per_thread) {
  const auto handle = reinterpret_cast<StreamHandle>(stream);
  return handle == 0 && per_thread ? kPerThreadStream : handle;
}

std::string function_name(const FunctionQueries& queries, CUfunction f) {
  const char* name = nullptr;
  if (queries.func_get_name && queries.func_get_name(&name, f) == CUDA_SUCCESS && name) return name;
  if (queries.kernel_get_name && queries.kernel_get_name(&name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && name)
    return name;
  return {};
}

std::optional<ParamLayout> function_param_layout(const FunctionQueries& queries, CUfunction f) {
  std::optional<ParamLayout> layout;
  if (queries.func_get_param_info)
    layout = profiler::read_param_layout(
        [&](std::size_t i, std::size_t* offset, std::size_t* size) { return queries.func_get_param_info(f, i, offset, size); });
  if ((!layout || layout->empty()) && queries.kernel_get_param_info) {
    auto as_kernel = profiler::read_param_layout([&](std::size_t i, std::size_t* offset, std::size_t* size) {
      return queries.kernel_get_param_info(reinterpret_cast<CUkernel>(f), i, offset, size);
    });
    if (as_kernel && !as_kernel->empty()) layout = std::move(as_kernel);
  }
  return layout;
}

// Asked once per function: a step launches the same few hundred kernels over and over.
const CudaLaunchRoute::FunctionInfo& CudaLaunchRoute::describe(CUfunction f) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = functions_.find(f); it != functions_.end()) return *it->second;
  }
  auto info = std::make_unique<FunctionInfo>();
  info->name = function_name(queries_, f);
  info->layout = function_param_layout(queries_, f);
  const auto kernel = reinterpret_cast<CUkernel>(f);
  CUmodule module = nullptr;
  CUlibrary library = nullptr;
  if (queries_.func_get_module && queries_.func_get_module(&module, f) == CUDA_SUCCESS && module)
    info->module = reinterpret_cast<std::uintptr_t>(module);
  else if (queries_.kernel_get_library && queries_.kernel_get_library(&library, kernel) == CUDA_SUCCESS && library)
    info->module = reinterpret_cast<std::uintptr_t>(library);
  std::unique_lock lock(mutex_);
  auto [it, inserted] = functions_.emplace(f, std::move(info));
  return *it->second;
}

bool CudaLaunchRoute::guard(const Launch& launch) noexcept {
  try {
    entry_.before_launch(launch);
    if (capturing_.load(std::memory_order_acquire) > 0)
      for (const LaunchRange& range : launch.ranges) {
        const auto block = entry_.block_containing(range.ptr);
        entry_.pin(block ? block->first : range.ptr, block ? block->second : range.bytes);
      }
    return true;
  } catch (const OutOfMemoryError& e) {
    last_refusal_ = CUDA_ERROR_OUT_OF_MEMORY;
    log::error("DELTA: {} '{}' not issued: {}", launch.kind == LaunchKind::kernel ? "launch of" : "call", launch.name,
               e.what());
  } catch (const std::exception& e) {
    last_refusal_ = CUDA_ERROR_UNKNOWN;
    log::error("DELTA: {} '{}' not issued: {}", launch.kind == LaunchKind::kernel ? "launch of" : "call", launch.name,
               e.what());
  } catch (...) {
    last_refusal_ = CUDA_ERROR_UNKNOWN;
  }
  counters_.refused.fetch_add(1, std::memory_order_relaxed);
  return false;
}

template <typename MakeRelaunch>
bool CudaLaunchRoute::guard_kernel(CUfunction f, CUstream stream, bool per_thread, void** params, void** extra,
                                   MakeRelaunch&& make_relaunch) noexcept {
  try {
    const FunctionInfo& info = describe(f);
    const ParamSource source{info.layout ? &*info.layout : nullptr, params, extra};
    FoundPointers found;
    if (!find_block_pointers(source, lookup_, found)) counters_.unreadable.fetch_add(1, std::memory_order_relaxed);
    counters_.launches.fetch_add(1, std::memory_order_relaxed);
    counters_.pointer_words.fetch_add(found.ranges.size(), std::memory_order_relaxed);
    Launch launch;
    launch.name = info.name;
    launch.stream = stream_of(stream, per_thread);
    launch.ranges = found.ranges;
    launch.module = info.module;
    // Called by the executor only when a plan may replay this launch: then the bytes are copied.
    launch.capture = [&]() -> Relaunch {
      std::optional<ParamCopy> copy = copy_params(source, found.offsets);
      if (!copy) return {};
      return make_relaunch(std::make_shared<const ParamCopy>(std::move(*copy)), info.name);
    };
    return guard(launch);
  } catch (const std::exception& e) {
    last_refusal_ = CUDA_ERROR_UNKNOWN;
    log::error("DELTA: a launch not issued: reading its parameters failed: {}", e.what());
  } catch (...) {
    last_refusal_ = CUDA_ERROR_UNKNOWN;
  }
  counters_.refused.fetch_add(1, std::memory_order_relaxed);
  return false;
}

namespace {

void check_replay(CUresult result, const std::string& name) {
  if (result != CUDA_SUCCESS)
    throw std::runtime_error("the driver refused the replay of '" + name + "' (CUresult " + std::to_string(result) + ")");
}

}  // namespace

CUresult CudaLaunchRoute::launch_kernel(LaunchKernelFn real, bool per_thread, CUfunction f, unsigned gx, unsigned gy,
                                        unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                        CUstream stream, void** params, void** extra) {
  const bool ok = guard_kernel(f, stream, per_thread, params, extra, [=](std::shared_ptr<const ParamCopy> copy, std::string name) {
    return Relaunch([=](std::span<const DevicePtr> ptrs, StreamHandle on) {
      PatchedParams patched(*copy, ptrs);
      check_replay(real(f, gx, gy, gz, bx, by, bz, shared, reinterpret_cast<CUstream>(on), patched.kernel_params(),
                        patched.extra()),
                   name);
    });
  });
  if (!ok) return last_refusal_;
  return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

CUresult CudaLaunchRoute::launch_cooperative(LaunchCooperativeFn real, bool per_thread, CUfunction f, unsigned gx,
                                             unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                             unsigned shared, CUstream stream, void** params) {
  const bool ok = guard_kernel(f, stream, per_thread, params, nullptr, [=](std::shared_ptr<const ParamCopy> copy, std::string name) {
    return Relaunch([=](std::span<const DevicePtr> ptrs, StreamHandle on) {
      PatchedParams patched(*copy, ptrs);
      check_replay(real(f, gx, gy, gz, bx, by, bz, shared, reinterpret_cast<CUstream>(on), patched.kernel_params()),
                   name);
    });
  });
  if (!ok) return last_refusal_;
  return real(f, gx, gy, gz, bx, by, bz, shared, stream, params);
}

CUresult CudaLaunchRoute::launch_kernel_ex(LaunchKernelExFn real, bool per_thread, const CUlaunchConfig* config,
                                           CUfunction f, void** params, void** extra) {
  if (config == nullptr) return real(config, f, params, extra);  // the driver's own error, unchanged
  const bool ok = guard_kernel(f, config->hStream, per_thread, params, extra, [=](std::shared_ptr<const ParamCopy> copy, std::string name) {
    // The configuration and its attributes are copied too: the caller's may be gone by then.
    auto attrs = std::make_shared<const std::vector<CUlaunchAttribute>>(
        config->attrs, config->attrs + (config->attrs ? config->numAttrs : 0));
    const CUlaunchConfig base = *config;
    return Relaunch([=](std::span<const DevicePtr> ptrs, StreamHandle on) {
      PatchedParams patched(*copy, ptrs);
      CUlaunchConfig again = base;
      again.hStream = reinterpret_cast<CUstream>(on);
      again.attrs = const_cast<CUlaunchAttribute*>(attrs->data());
      again.numAttrs = static_cast<unsigned>(attrs->size());
      check_replay(real(&again, f, patched.kernel_params(), patched.extra()), name);
    });
  });
  if (!ok) return last_refusal_;
  return real(config, f, params, extra);
}

bool CudaLaunchRoute::guard_transfer(LaunchKind kind, const char* name, bool per_thread, CUstream stream, DevicePtr dst,
                                     DevicePtr src, std::size_t bytes) noexcept {
  try {
    counters_.transfers.fetch_add(1, std::memory_order_relaxed);
    std::vector<LaunchRange> ranges;
    // The blocks holding the first and the last byte of each side: a copy spans one tensor,
    // rarely two neighbours.
    auto add = [&](DevicePtr start, bool write) {
      if (start == 0 || bytes == 0) return;
      for (DevicePtr at : {start, start + bytes - 1}) {
        const auto block = lookup_(at);
        if (!block) continue;
        const DevicePtr from = std::max(start, block->first);
        const DevicePtr to = std::min<DevicePtr>(start + bytes, block->first + block->second);
        if (!ranges.empty() && ranges.back().ptr == from) continue;  // both ends in one block
        ranges.push_back({from, static_cast<std::size_t>(to - from), !write, write});
      }
    };
    add(dst, true);
    add(src, false);
    Launch launch;
    launch.name = name;
    launch.kind = kind;
    launch.stream = stream_of(stream, per_thread);
    launch.ranges = ranges;
    return guard(launch);
  } catch (...) {
    last_refusal_ = CUDA_ERROR_UNKNOWN;
    counters_.refused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
}

void CudaLaunchRoute::before_unload(std::uintptr_t module) noexcept {
  try {
    entry_.before_module_unload(module);
  } catch (const std::exception& e) {
    log::error("DELTA: before a module unloads: {}", e.what());
  }
  std::unique_lock lock(mutex_);
  for (auto it = functions_.begin(); it != functions_.end();)  // its handles may be reused
    it = it->second->module == module ? functions_.erase(it) : std::next(it);
}

void CudaLaunchRoute::before_capture() noexcept {
  capturing_.fetch_add(1, std::memory_order_acq_rel);
  try {
    entry_.before_graph_capture();
  } catch (const std::exception& e) {
    log::error("DELTA: before a graph capture: {}", e.what());
  }
}

void CudaLaunchRoute::after_capture() noexcept {
  if (capturing_.load(std::memory_order_acquire) > 0) capturing_.fetch_sub(1, std::memory_order_acq_rel);
  try {
    entry_.after_graph_capture();
  } catch (...) {
  }
}

void CudaLaunchRoute::pin(DevicePtr ptr) noexcept {
  try {
    counters_.pins.fetch_add(1, std::memory_order_relaxed);
    const auto block = entry_.block_containing(ptr);
    entry_.pin(block ? block->first : ptr, block ? block->second : 1);
  } catch (const std::exception& e) {
    log::error("DELTA: pinning address {}: {}", static_cast<unsigned long long>(ptr), e.what());
  }
}

void CudaLaunchRoute::check_invariants() const {
  if (capturing_.load() < 0) throw InvariantError("cuda route: a negative number of graph captures in progress");
  std::shared_lock lock(mutex_);
  for (const auto& [f, info] : functions_) {
    if (!info) throw InvariantError("cuda route: a function handle cached without a description");
    if (!info->layout) continue;
    std::size_t end = 0;
    for (std::size_t i = 0; i < info->layout->size(); ++i) {
      const profiler::ParamSlot& slot = (*info->layout)[i];
      if (slot.offset < end)
        throw InvariantError("cuda route: function '" + info->name + "': parameter " + std::to_string(i) +
                             " overlaps the one before it (offset " + std::to_string(slot.offset) + ")");
      end = slot.offset + slot.size;
    }
  }
}

RouteStats CudaLaunchRoute::stats() const {
  RouteStats s;
  s.launches = counters_.launches.load();
  s.transfers = counters_.transfers.load();
  s.unreadable = counters_.unreadable.load();
  s.pointer_words = counters_.pointer_words.load();
  s.refused = counters_.refused.load();
  s.pins = counters_.pins.load();
  std::shared_lock lock(mutex_);
  s.functions = functions_.size();
  return s;
}

}  // namespace delta::executor
