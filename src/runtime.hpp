// The process-wide allocator behind the C ABI and the LD_PRELOAD shim.
#pragma once

#include <delta/allocator.hpp>

namespace delta {

// Created on first use from the environment (DELTA_DEVICE, PYTORCH_CUDA_ALLOC_CONF, DELTA_*).
// Throws std::exception with a clear message when the settings are malformed or no device
// can be opened; the next call tries again.
CachingAllocator& runtime_allocator();
// The instance if it was created, else nullptr (never creates one).
CachingAllocator* runtime_allocator_if_created() noexcept;

// DELTA_PRELOAD (preload_shim.cpp): false when the job asked every interposed call to be
// forwarded untouched (the escape hatch). Read once.
bool preload_enabled();
// Whether an address (a symbol, a return address) lies in libdelta.so itself.
bool defined_in_this_library(const void* symbol);

// Remember a failure for delta_last_error() and log it once.
void set_last_error(const char* what) noexcept;

}  // namespace delta

namespace delta {
const char* last_error_text() noexcept;  // this thread's last failure, "" if none
void clear_last_error() noexcept;
}  // namespace delta
