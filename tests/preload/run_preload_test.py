#!/usr/bin/env python3
"""Runs preload_probe three ways and checks that LD_PRELOAD=libdelta.so really serves the CUDA
runtime's allocation calls:

  delta     LD_PRELOAD=libdelta.so DELTA_DEVICE=sim (or cuda): DELTA answers every call it owns
  escape    the same with DELTA_PRELOAD=0: every call reaches the real runtime
  native    no preload at all: what the real runtime says on this machine

Foreign pointers must reach the real runtime in every mode: the delta run must report the same
error code for them as the native run (on a machine without a GPU the runtime fails with
cudaErrorInsufficientDriver or cudaErrorNoDevice, so the codes show who answered).

usage: run_preload_test.py PROBE LIBDELTA [sim|cuda]

With cuda, DELTA serves from the real GPU; without one the test exits with 77 (skipped), or
fails when DELTA_REQUIRE_GPU=1.
"""
import json
import os
import subprocess
import sys
import tempfile

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_MEMORY_ALLOCATION = 2

failures = []


def check(condition, what, detail=None):
    status = "ok  " if condition else "FAIL"
    print(f"  [{status}] {what}" + ("" if condition or detail is None else f"  ({detail})"))
    if not condition:
        failures.append(what)


def run_probe(probe, extra_env):
    env = dict(os.environ)
    for key in ("LD_PRELOAD", "DELTA_PRELOAD", "DELTA_DEVICE"):
        env.pop(key, None)
    env.update(extra_env)
    with tempfile.TemporaryDirectory() as scratch:
        output = os.path.join(scratch, "probe.json")
        completed = subprocess.run([probe, output], env=env, capture_output=True, text=True,
                                   timeout=120)
        text = open(output).read() if os.path.exists(output) else ""
    if completed.returncode != 0:
        sys.exit(f"preload_probe exited with {completed.returncode} under {extra_env}\n"
                 f"output:\n{text}\nstdout:\n{completed.stdout}\nstderr:\n{completed.stderr}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        sys.exit(f"preload_probe wrote invalid JSON under {extra_env}: {error}\n{text}"
                 f"\nstderr:\n{completed.stderr}")


def check_delta_run(result, native, device):
    print(f"delta (LD_PRELOAD=libdelta.so, DELTA_DEVICE={device}):")
    check(result["delta_loaded"], "libdelta.so is loaded and exports delta_owns")
    check(result["stats_after"] is not None and result["stats_after"].get("device") == device,
          f"DELTA runs on the {device} device", result["stats_after"])

    malloc = result["malloc"]
    check(malloc["rc"] == CUDA_SUCCESS and malloc["nonnull"], "cudaMalloc(1 MiB) succeeds", malloc)
    check(malloc["owned"] == 1, "cudaMalloc's pointer is DELTA's", malloc)
    malloc_async = result["malloc_async"]
    check(malloc_async["rc"] == CUDA_SUCCESS and malloc_async["nonnull"],
          "cudaMallocAsync(3 MiB, per-thread stream) succeeds", malloc_async)
    check(malloc_async["owned"] == 1 and malloc_async["distinct"],
          "cudaMallocAsync's pointer is DELTA's and distinct", malloc_async)

    before, after = result["meminfo_before"], result["meminfo_after"]
    stats_before = result["stats_before"] or {}  # None when DELTA is not in the process
    stats_after = result["stats_after"] or {}
    check(before["rc"] == CUDA_SUCCESS and after["rc"] == CUDA_SUCCESS, "cudaMemGetInfo succeeds")
    check(before["total"] == stats_before.get("limit_bytes") and before["total"] > 0,
          "cudaMemGetInfo total is DELTA's limit", (before, stats_before.get("limit_bytes")))
    check(before["free"] == before["total"] - stats_before.get("allocated_bytes", -1),
          "free = limit - allocated before allocating", (before, stats_before.get("allocated_bytes")))
    check(after["free"] == after["total"] - stats_after.get("allocated_bytes", -1),
          "free = limit - allocated after allocating", (after, stats_after.get("allocated_bytes")))
    check(before["free"] - after["free"] >= (4 << 20),
          "free shrank by at least the 4 MiB allocated", (before["free"], after["free"]))

    zero = result["malloc_zero"]
    check(zero["rc"] == CUDA_SUCCESS and zero["null"], "cudaMalloc(0) succeeds with NULL", zero)
    check(result["malloc_null_out"]["rc"] == CUDA_ERROR_INVALID_VALUE,
          "cudaMalloc(NULL, n) is cudaErrorInvalidValue", result["malloc_null_out"])
    huge = result["malloc_huge"]
    check(huge["rc"] == CUDA_ERROR_MEMORY_ALLOCATION and huge["null"],
          "cudaMalloc(1 PiB) is cudaErrorMemoryAllocation", huge)
    check("cudaMalloc" in huge["last_error"] and len(huge["last_error"]) > 20,
          "delta_last_error explains the failed cudaMalloc", huge["last_error"])

    check(result["free_async"]["rc"] == CUDA_SUCCESS and result["free_async"]["owned_after"] == 0,
          "cudaFreeAsync on another stream releases DELTA's block", result["free_async"])
    check(result["free"]["rc"] == CUDA_SUCCESS and result["free"]["owned_after"] == 0,
          "cudaFree releases DELTA's block", result["free"])
    stats_end = result["stats_end"] or {}
    check(stats_end.get("allocated_bytes") == 0 or stats_end.get("pending_frees", 0) > 0,
          "nothing stays allocated (or it waits on a stream)", stats_end)

    for key in ("free_foreign", "free_async_foreign"):
        mine, theirs = result[key], native[key]
        check(mine["rc"] != CUDA_SUCCESS and mine["rc"] == theirs["rc"],
              f"{key}: a foreign pointer is forwarded to the real runtime "
              f"(got {mine['name']}, the runtime alone says {theirs['name']})", (mine, theirs))


def check_escape_run(result, native):
    print("escape hatch (LD_PRELOAD=libdelta.so, DELTA_PRELOAD=0):")
    check(result["delta_loaded"], "libdelta.so is loaded")
    for key in ("malloc", "malloc_async", "meminfo_before", "malloc_zero", "malloc_null_out",
                "free_foreign"):
        check(result[key]["rc"] == native[key]["rc"],
              f"{key} answers exactly like the real runtime (rc {native[key]['rc']})",
              (result[key], native[key]))
    check(result["malloc"]["owned"] == 0 and result["malloc_async"]["owned"] == 0,
          "no pointer is DELTA's")


def check_native_run(result):
    print("native (no preload):")
    check(not result["delta_loaded"], "libdelta.so is not in the process")
    check(result["free_foreign"]["rc"] != CUDA_SUCCESS,
          f"the runtime rejects the made-up pointer ({result['free_foreign']['name']})")
    gpu = result["malloc"]["rc"] == CUDA_SUCCESS
    print(f"  [info] real runtime cudaMalloc: rc {result['malloc']['rc']}"
          f" ({'a GPU is present' if gpu else 'no usable GPU here'}); "
          f"foreign cudaFree: {result['free_foreign']['name']}")


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in ("sim", "cuda")):
        sys.exit(__doc__)
    probe, library = sys.argv[1], os.path.abspath(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) == 4 else "sim"
    for path in (probe, library):
        if not os.path.exists(path):
            sys.exit(f"not found: {path}")

    native = run_probe(probe, {})
    if device == "cuda" and native["malloc"]["rc"] != CUDA_SUCCESS:
        print(f"no usable GPU: the real runtime's cudaMalloc fails with rc {native['malloc']['rc']}")
        if os.environ.get("DELTA_REQUIRE_GPU") == "1":
            print("DELTA_REQUIRE_GPU=1: failing instead of skipping")
            return 1
        return 77
    delta = run_probe(probe, {"LD_PRELOAD": library, "DELTA_DEVICE": device})
    escape = run_probe(probe, {"LD_PRELOAD": library, "DELTA_DEVICE": device, "DELTA_PRELOAD": "0"})

    check_native_run(native)
    check_delta_run(delta, native, device)
    check_escape_run(escape, native)

    if failures:
        print(f"\n{len(failures)} check(s) failed")
        return 1
    print("\nall preload checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
