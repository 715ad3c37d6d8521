// The driver's launch route under LD_PRELOAD: libdelta exports dlsym and cuGetProcAddress(_v2).
// cudart (static or shared) opens libcuda.so.1, fetches cuGetProcAddress with dlsym and every
// other entry point through it; so do cuBLAS, cuDNN, NCCL and Triton. When libdelta is
// preloaded at process start, its dlsym is the process's, and for the entry points in
// `entries()` (launches, copies and memsets, module unloads, graph capture begin/end, IPC
// export and allocation-handle retains) the caller receives DELTA's wrapper; the real function
// is kept for it. Every other symbol, and every lookup libdelta makes itself, is answered by
// the real dlsym / driver untouched.
//
// A wrapper with no route installed costs one atomic load and a call: it forwards with the
// caller's arguments unchanged. Run mode installs the route (src/modes/run_mode.cpp).
// DELTA_PRELOAD=0 hands out the real functions themselves.
#pragma once

#include "executor/routes/cuda_route.hpp"

#include <atomic>
#include <span>

namespace delta::interpose {

// One interposed entry point: the name cuGetProcAddress is asked for, with the flavour (the
// per-thread-default-stream one, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), the
// cudaVersion from which the driver hands out the ABI the wrapper has, the exported symbol of
// that ABI (what dlsym is asked for), the wrapper, and where the real function is kept.
struct Interposed {
  const char* proc_name;
  bool per_thread;
  int min_version;
  const char* symbol;
  void* wrapper;
  std::atomic<void*>* real;
};
std::span<const Interposed> entries();  // driver_wrappers.cpp

// Whether the process's dlsym is this library's (preloaded at process start) and
// DELTA_PRELOAD allows it: then every entry point fetched from the driver passes through here.
bool live();

// The wrappers' route: null forwards untouched. Installed once, never removed.
inline std::atomic<executor::CudaLaunchRoute*> installed_route{nullptr};
inline executor::CudaLaunchRoute* route() noexcept { return installed_route.load(std::memory_order_acquire); }
void install_route(executor::CudaLaunchRoute* route);

// What the route asks of the real driver about functions (names, layouts, modules).
executor::FunctionQueries function_queries();

// The real symbol behind `symbol`, asked of libcuda.so.1 directly, for a wrapper whose real
// function has not been seen yet (a program linked against libcuda calling DELTA's export).
void* real_driver_symbol(const char* symbol);

}  // namespace delta::interpose
