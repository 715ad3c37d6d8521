/* DELTA's C ABI: the PyTorch pluggable-allocator entry points and a small control API.
 * Everything here is safe to call from any thread. Functions that can fail return 0 on success
 * and a negative value on failure; delta_last_error() then describes the failure. */
#ifndef DELTA_DELTA_H
#define DELTA_DELTA_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DELTA_API __attribute__((visibility("default")))
#else
#define DELTA_API
#endif

typedef void* delta_stream_t; /* cudaStream_t / CUstream */

/* --- torch.cuda.memory.CUDAPluggableAllocator(path, "delta_malloc", "delta_free") --- */
DELTA_API void* delta_malloc(ssize_t size, int device, delta_stream_t stream);
DELTA_API void delta_free(void* ptr, ssize_t size, int device, delta_stream_t stream);
/* Optional hooks with the signatures CUDAPluggableAllocator's C++ setters take. */
DELTA_API void delta_init(int device_count);
DELTA_API void delta_reset(void);                                 /* empty cache */
DELTA_API void delta_memory_fraction(double fraction, int device);
DELTA_API void delta_record_stream(void* ptr, delta_stream_t stream);

/* --- control and inspection --- */
DELTA_API int delta_empty_cache(void);
DELTA_API int delta_owns(const void* ptr);                         /* 1 if DELTA allocated ptr and it is live */
DELTA_API int delta_stats_json(char* buffer, size_t capacity);     /* bytes needed incl. NUL, or <0 */
DELTA_API int delta_reset_peak_stats(void);
DELTA_API int delta_dump(const char* path);                        /* atomic JSON dump of events and state */
DELTA_API int delta_check_invariants(void);
/* --- recording (DELTA_MODE=record) --- */
DELTA_API int delta_step(void);                                    /* marks the end of a training step; no-op unless recording */
DELTA_API int delta_trace_dump(const char* path);                  /* ends the recording, writes the trace (NULL: DELTA_TRACE) */
DELTA_API const char* delta_last_error(void);                      /* thread-local; "" if none */
DELTA_API const char* delta_version(void);

#ifdef __cplusplus
}
#endif
#endif
