/* Calls the CUDA runtime's allocation functions the way an unmodified program does, and prints
 * what happened as one JSON object on stdout. Linked against the SHARED runtime (libcudart.so),
 * since LD_PRELOAD can only interpose dynamically bound calls. run_preload_test.py runs it with
 * and without LD_PRELOAD=libdelta.so and judges the results; this program judges nothing.
 *
 * DELTA's C API is looked up with dlsym(RTLD_DEFAULT): present only when libdelta.so is
 * preloaded, which is itself one of the facts reported.
 *
 * usage: preload_probe [OUTPUT.json]   (stdout when no path is given; a path keeps the JSON
 * apart from anything a library logs to stdout) */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*owns_fn)(const void*);
typedef int (*stats_json_fn)(char*, size_t);
typedef const char* (*last_error_fn)(void);

static FILE* out;
static owns_fn delta_owns_ptr;
static stats_json_fn delta_stats_ptr;
static last_error_fn delta_last_error_ptr;

/* A made-up device address no allocator handed out. */
#define FOREIGN_POINTER ((void*)(uintptr_t)0x7f00dead0000ull)

static int owned(const void* ptr) { return delta_owns_ptr ? delta_owns_ptr(ptr) : 0; }

static void print_string(const char* text) {
  fputc('"', out);
  for (const char* c = text ? text : ""; *c; ++c) {
    unsigned char ch = (unsigned char)*c;
    if (ch == '"' || ch == '\\') fprintf(out, "\\%c", ch);
    else if (ch < 0x20) fprintf(out, "\\u%04x", ch);
    else fputc(ch, out);
  }
  fputc('"', out);
}

static void print_error(const char* key, cudaError_t rc) {
  fprintf(out, "\"%s\": {\"rc\": %d, \"name\": ", key, (int)rc);
  print_string(cudaGetErrorName(rc));
  fprintf(out, "},\n");
}

static void print_stats(const char* key) {
  fprintf(out, "\"%s\": ", key);
  if (!delta_stats_ptr) {
    fprintf(out, "null,\n");
    return;
  }
  int needed = delta_stats_ptr(NULL, 0);
  char* buffer = needed > 0 ? malloc((size_t)needed) : NULL;
  if (buffer && delta_stats_ptr(buffer, (size_t)needed) > 0) fprintf(out, "%s,\n", buffer);
  else fprintf(out, "null,\n");
  free(buffer);
}

static void print_meminfo(const char* key) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t rc = cudaMemGetInfo(&free_bytes, &total_bytes);
  fprintf(out, "\"%s\": {\"rc\": %d, \"free\": %zu, \"total\": %zu},\n", key, (int)rc, free_bytes,
         total_bytes);
}

int main(int argc, char** argv) {
  out = argc > 1 ? fopen(argv[1], "w") : stdout;
  if (!out) {
    perror(argv[1]);
    return 2;
  }
  delta_owns_ptr = (owns_fn)dlsym(RTLD_DEFAULT, "delta_owns");
  delta_stats_ptr = (stats_json_fn)dlsym(RTLD_DEFAULT, "delta_stats_json");
  delta_last_error_ptr = (last_error_fn)dlsym(RTLD_DEFAULT, "delta_last_error");

  fprintf(out, "{\n\"delta_loaded\": %s,\n", delta_owns_ptr ? "true" : "false");

  print_meminfo("meminfo_before");
  print_stats("stats_before");

  void* plain = NULL;
  cudaError_t rc = cudaMalloc(&plain, (size_t)1 << 20);
  fprintf(out, "\"malloc\": {\"rc\": %d, \"nonnull\": %s, \"owned\": %d},\n", (int)rc,
         plain ? "true" : "false", owned(plain));

  void* on_stream = NULL;
  rc = cudaMallocAsync(&on_stream, (size_t)3 << 20, cudaStreamPerThread);
  fprintf(out, "\"malloc_async\": {\"rc\": %d, \"nonnull\": %s, \"owned\": %d, \"distinct\": %s},\n",
         (int)rc, on_stream ? "true" : "false", owned(on_stream),
         on_stream != plain ? "true" : "false");

  print_meminfo("meminfo_after");
  print_stats("stats_after");

  void* zero = (void*)0x1;
  rc = cudaMalloc(&zero, 0);
  fprintf(out, "\"malloc_zero\": {\"rc\": %d, \"null\": %s},\n", (int)rc, zero ? "false" : "true");

  rc = cudaMalloc(NULL, 4096);
  fprintf(out, "\"malloc_null_out\": {\"rc\": %d},\n", (int)rc);

  void* huge = NULL;
  rc = cudaMalloc(&huge, (size_t)1 << 50);
  fprintf(out, "\"malloc_huge\": {\"rc\": %d, \"null\": %s, \"last_error\": ", (int)rc,
         huge ? "false" : "true");
  print_string(delta_last_error_ptr ? delta_last_error_ptr() : "");
  fprintf(out, "},\n");
  if (huge && rc == cudaSuccess) cudaFree(huge);

  /* Freed on a stream other than the one it was allocated on. */
  rc = on_stream ? cudaFreeAsync(on_stream, 0) : cudaErrorInvalidValue;
  fprintf(out, "\"free_async\": {\"rc\": %d, \"owned_after\": %d},\n", (int)rc, owned(on_stream));

  rc = plain ? cudaFree(plain) : cudaErrorInvalidValue;
  fprintf(out, "\"free\": {\"rc\": %d, \"owned_after\": %d},\n", (int)rc, owned(plain));

  print_error("free_foreign", cudaFree(FOREIGN_POINTER));
  print_error("free_async_foreign", cudaFreeAsync(FOREIGN_POINTER, 0));
  print_stats("stats_end");

  fprintf(out, "\"done\": true\n}\n");
  return fclose(out) == 0 ? 0 : 2;
}
