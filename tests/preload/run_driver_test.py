#!/usr/bin/env python3
"""Runs driver_probe against the stub driver three ways and checks DELTA's driver interposer:

  delta     LD_PRELOAD=libdelta.so: cuGetProcAddress(_v2) and dlsym hand out DELTA's wrappers for
            the launch, copy, memset, unload, capture and IPC entry points, in the flavour asked
            for (per-thread default stream or not); everything else is the driver's own
  escape    the same with DELTA_PRELOAD=0: every function is the driver's own
  dlopened  no preload; the probe loads libdelta.so itself, late, as the pluggable allocator
            does: its dlsym cannot take over, nothing is wrapped, and DELTA says so
            (delta_stats_json's driver_interposer: the reason run mode refuses on a GPU)
  native    no preload

In every mode every call must reach the stub under the expected exported name with its
arguments unchanged (no run mode: the wrappers forward untouched), and RTLD_NEXT must keep
its meaning.

A second probe calls the launch entry points through link-time symbols (-lcuda, no dlsym):
preloaded, libdelta's exports of the same names take those calls and forward them unchanged.

usage: run_driver_test.py PROBE STUB_DIR LIBDELTA LINK_PROBE
"""
import json
import os
import subprocess
import sys
import tempfile

INTERPOSED = [
    "cuLaunchKernel", "cuLaunchKernel/default", "cuLaunchKernel/ptds", "dlsym:cuLaunchKernel_ptsz",
    "cuLaunchKernelEx", "cuLaunchKernelEx/ptds", "cuModuleUnload", "cuLibraryUnload",
    "cuStreamBeginCapture", "cuStreamBeginCapture/ptds", "cuStreamEndCapture/ptds",
    "cuMemcpyHtoDAsync/ptds", "cuMemsetD8Async", "cuIpcGetMemHandle", "cuGetProcAddress",
    "cuGetProcAddress:cuLaunchKernel",
]
PASSED_THROUGH = ["cuMemAlloc", "cuStreamBeginCapture/10.0"]

failures = []


def check(condition, what):
    print(f"  [{'ok  ' if condition else 'FAIL'}] {what}")
    if not condition:
        failures.append(what)


def run(probe, stub_dir, extra_env, load=None):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "DELTA_PRELOAD", "DELTA_MODE")}
    env["LD_LIBRARY_PATH"] = stub_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.update(extra_env)
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "probe.json")
        done = subprocess.run([probe, path] + ([load] if load else []), env=env, capture_output=True, text=True, timeout=60)
        text = open(path).read() if os.path.exists(path) else ""
    if done.returncode != 0:
        sys.exit(f"driver_probe exited with {done.returncode} under {extra_env}\n{text}\n{done.stderr}")
    return json.loads(text)


def judge(name, result, delta_live, interposer):
    print(f"{name}:")
    check(result["interposer"] == interposer, f"DELTA reports its interposer as '{interposer}' (got '{result['interposer']}')")
    check(result["get_proc_wrapped"] == delta_live,
          f"cuGetProcAddress_v2 from dlsym is {'DELTA' if delta_live else 'the driver'}'s")
    for what in INTERPOSED + PASSED_THROUGH:
        r = result["results"][what]
        check(r["found"], f"{what}: found")
        expect = delta_live and what in INTERPOSED
        check(r["wrapped"] == expect, f"{what}: {'DELTA wrapper' if expect else 'the driver own function'}")
        check(r["forwarded"], f"{what}: reached the driver unchanged (as {r['reached']})")
    check(result["next_getpid_is_libc"], "dlsym(RTLD_NEXT, getpid) is libc's")
    check(result["next_delta_owns"] == result["default_delta_owns"] == (name != "native"),
          "dlsym(RTLD_NEXT) from the program finds libdelta's symbols exactly when RTLD_DEFAULT does")


def judge_linked(name, result, through_delta):
    print(f"{name} (link-time symbols):")
    for what, r in result.items():
        expect = "libdelta" if through_delta else "driver"
        check(r["bound"] == expect, f"{what}: the link-time symbol is bound to {expect} (got {r['bound']})")
        check(r["forwarded"], f"{what}: reached the driver unchanged")


def main():
    probe, stub_dir, libdelta, link_probe = sys.argv[1:5]
    judge_linked("delta", run(link_probe, stub_dir, {"LD_PRELOAD": libdelta}), True)
    judge_linked("native", run(link_probe, stub_dir, {}), False)
    sim = {"DELTA_DEVICE": "sim"}  # delta_stats_json starts the allocator: on the sim here
    judge("delta", run(probe, stub_dir, {"LD_PRELOAD": libdelta, **sim}), True, "live")
    judge("escape", run(probe, stub_dir, {"LD_PRELOAD": libdelta, "DELTA_PRELOAD": "0", **sim}), False,
          "off (DELTA_PRELOAD=0)")
    judge("dlopened", run(probe, stub_dir, sim, load=libdelta), False, "not preloaded")
    judge("native", run(probe, stub_dir, {}), False, "absent")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
