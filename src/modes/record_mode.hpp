// DELTA_MODE=record: the recorder hooked into the process-wide allocator.
//
// The allocator does not know it is being recorded: the entry points (C ABI) report each
// allocation and free here after the allocator served it, and launches come from the
// recorder's own activity source (CUPTI, or the sim device's observer).
#pragma once

#include <delta/allocator.hpp>

#include <cstddef>

namespace delta {

// Called once when the process-wide allocator is created: reads DELTA_MODE, DELTA_TRACE,
// DELTA_RECORD_ITERATIONS (and RANK / LOCAL_RANK for the file name) and, in record mode,
// starts recording on the allocator's device and registers the exit handler that writes the
// trace. Throws std::exception naming the variable when a setting is malformed, or saying why
// launches cannot be observed; nothing is started then.
void start_record_mode_from_env(CachingAllocator& allocator);

bool recording() noexcept;

// The allocation hooks; no-ops unless recording. Never throw.
void record_allocated(const void* ptr, std::size_t size, StreamHandle stream) noexcept;
void record_freed(const void* ptr) noexcept;

// delta_step() and delta_trace_dump(): throw on failure (the C ABI turns that into -1).
void record_step();
void record_dump(const char* path);

}  // namespace delta
