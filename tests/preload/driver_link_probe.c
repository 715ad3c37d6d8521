/* Calls the driver's launch entry points through the link-time symbols (linked against the
 * stub libcuda.so.1, no dlsym), as a library built with -lcuda does, and writes which library
 * the dynamic linker binds each name to (the global-scope definition, found as the PLT finds
 * it) and whether the arguments reached the stub unchanged. run_driver_test.py judges it with
 * and without LD_PRELOAD=libdelta.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
int cuLaunchKernel_ptsz(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                        void**);
int cuLaunchKernelEx(const void*, void*, void**, void**);
const char* stub_name(void);
const uint64_t* stub_args(void);

static const char* bound(const char* symbol) {
  Dl_info info;
  void* fn = dlsym(RTLD_DEFAULT, symbol);
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "?";
  return strstr(info.dli_fname, "libdelta") ? "libdelta" : strstr(info.dli_fname, "libcuda") ? "driver" : "?";
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* out = fopen(argv[1], "w");
  if (!out) return 2;
  const uint64_t L[] = {0x1111, 1, 2, 3, 4, 5, 6, 7, 0x88, 0x99, 0xaa};
  fprintf(out, "{");
  cuLaunchKernel((void*)0x1111, 1, 2, 3, 4, 5, 6, 7, (void*)0x88, (void**)0x99, (void**)0xaa);
  int same = strcmp(stub_name(), "cuLaunchKernel") == 0 && memcmp(stub_args(), L, sizeof L) == 0;
  fprintf(out, "\"cuLaunchKernel\": {\"bound\": \"%s\", \"forwarded\": %s}, ", bound("cuLaunchKernel"), same ? "true" : "false");
  cuLaunchKernel_ptsz((void*)0x1111, 1, 2, 3, 4, 5, 6, 7, (void*)0x88, (void**)0x99, (void**)0xaa);
  same = strcmp(stub_name(), "cuLaunchKernel_ptsz") == 0 && memcmp(stub_args(), L, sizeof L) == 0;
  fprintf(out, "\"cuLaunchKernel_ptsz\": {\"bound\": \"%s\", \"forwarded\": %s}, ", bound("cuLaunchKernel_ptsz"), same ? "true" : "false");
  const uint64_t E[] = {0xc0f1, 0x1111, 0x99, 0xaa};
  cuLaunchKernelEx((const void*)0xc0f1, (void*)0x1111, (void**)0x99, (void**)0xaa);
  same = strcmp(stub_name(), "cuLaunchKernelEx") == 0 && memcmp(stub_args(), E, sizeof E) == 0;
  fprintf(out, "\"cuLaunchKernelEx\": {\"bound\": \"%s\", \"forwarded\": %s}}\n", bound("cuLaunchKernelEx"), same ? "true" : "false");
  fclose(out);
  return 0;
}
