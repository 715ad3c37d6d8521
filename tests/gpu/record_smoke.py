#!/usr/bin/env python3
"""DELTA_MODE=record on a real GPU: record a small PyTorch model and check the trace.

Runs the same training loop twice, each in its own process, with DELTA serving every CUDA
allocation through torch.cuda.memory.CUDAPluggableAllocator(libdelta.so, "delta_malloc",
"delta_free"):

  cache    DELTA_MODE=cache, the reference step time
  record   DELTA_MODE=record, DELTA_RECORD_ITERATIONS=2, delta_step() after every step: CUPTI
           records the first two iterations and the trace is written at the second marker

Then checks the trace: it reads and validates, holds two iterations, and every kernel launch,
copy and memset is attributed to at least one DELTA block. Prints what was recorded (kernels,
phases, launches without parameter layouts) and the recorder's overhead: the time its callbacks
took (trace metadata) and the step time recorded versus not.

usage: record_smoke.py --lib build-gpu/src/libdelta.so [--steps 6] [--json out.json]
                       [--model mlp|gpt2] [--keep-trace trace.json]
       record_smoke.py --check-trace trace.json     (only the trace checks, on any trace)
Exits nonzero on any failed check or failed run.
"""
import argparse
import collections
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "importers"))

RECORDED_ITERATIONS = 2


# --------------------------------------------------------------------------------------------
# worker: one training run in this process
# --------------------------------------------------------------------------------------------

def build_model(torch):
    # Linear layers (cuBLAS), LayerNorm, GELU, a residual: elementwise, reduction and GEMM
    # kernels, launched through the runtime, the driver and cuBLAS.
    class Block(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.up = torch.nn.Linear(width, 4 * width)
            self.down = torch.nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    width, classes = 256, 100
    model = torch.nn.Sequential(torch.nn.Linear(128, width), Block(width), Block(width),
                                torch.nn.LayerNorm(width), torch.nn.Linear(width, classes))
    return model, classes


def build_gpt2(torch):
    # GPT-2 small's shape (12 layers, width 768) from a local config: no download. Eager
    # attention, because the fused attention kernels' backward is not deterministic and the
    # cache and record runs must compute the same losses.
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_positions=512, attn_implementation="eager")
    return GPT2LMHeadModel(config), config.vocab_size


def run_worker(args):
    import torch  # imported here: the driver process never touches CUDA

    allocator = torch.cuda.memory.CUDAPluggableAllocator(args.lib, "delta_malloc", "delta_free")
    torch.cuda.memory.change_current_allocator(allocator)
    lib = ctypes.CDLL(args.lib)  # the loader hands back the instance the allocator uses
    lib.delta_step.restype = ctypes.c_int
    lib.delta_last_error.restype = ctypes.c_char_p

    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    if args.model == "gpt2":
        model, vocabulary = build_gpt2(torch)
        tokens = torch.randint(0, vocabulary, (8, 512), device="cuda")
        forward = lambda: model(input_ids=tokens, labels=tokens).loss  # noqa: E731
    else:
        model, classes = build_model(torch)
        inputs = torch.randn(64, 128, device="cuda")
        targets = torch.randint(0, classes, (64,), device="cuda")
        forward = lambda: torch.nn.functional.cross_entropy(model(inputs), targets)  # noqa: E731
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times, losses = [], []
    for _ in range(args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = forward()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if lib.delta_step() != 0:
            raise RuntimeError(f"delta_step failed: {lib.delta_last_error().decode()}")
    print("RESULT " + json.dumps({"times": times, "losses": losses}), flush=True)


# --------------------------------------------------------------------------------------------
# trace checks
# --------------------------------------------------------------------------------------------

def check_trace(path, expect_iterations=None):
    """Returns (problems, summary) for the trace at path."""
    import delta_trace

    problems = []
    trace = delta_trace.read(path)
    try:
        delta_trace.validate(trace)
    except delta_trace.TraceError as error:
        problems.append(f"the trace does not validate: {error}")
    if expect_iterations is not None and len(trace.iterations) != expect_iterations:
        problems.append(f"{len(trace.iterations)} iterations recorded, expected {expect_iterations}")
    if not trace.ops:
        problems.append("no launches were recorded")
    unattributed = [op for op in trace.ops if not op.blocks]
    if unattributed:
        names = collections.Counter(op.name for op in unattributed)
        listed = ", ".join(f"{name} x{count}" for name, count in names.most_common(10))
        problems.append(f"{len(unattributed)} of {len(trace.ops)} launches touch no DELTA block: {listed}")
    kinds = collections.Counter(op.kind.name.lower() for op in trace.ops)
    phases = collections.Counter(op.phase.name.lower() for op in trace.ops)
    accesses = collections.Counter(access.name.lower() for op in trace.ops for _, access in op.blocks)
    meta = trace.metadata
    ops = max(len(trace.ops), 1)
    summary = {
        "blocks": len(trace.blocks),
        "ops": len(trace.ops),
        "iterations": [it.end_op - it.first_op for it in trace.iterations],
        "kinds": dict(kinds),
        "phases": dict(phases),
        "accesses": dict(accesses),
        "distinct_kernels": len({op.name for op in trace.ops if op.kind.name == "KERNEL"}),
        "ops_with_duration": sum(1 for op in trace.ops if op.duration_ns > 0),
        "recorder_overhead_ns": int(meta.get("recorder_overhead_ns", 0)),
        "recorder_callbacks": int(meta.get("recorder_callbacks", 0)),
        "recorder_callback_ns": int(meta.get("recorder_callback_ns", 0)),
        "recorder_overhead_per_op_ns": int(meta.get("recorder_overhead_per_op_ns", 0)),
        "cupti_overhead_ns": int(meta.get("cupti_overhead_ns", 0)),
        "launches_without_param_layout": int(meta.get("launches_without_param_layout", 0)),
        "failed_host_stub_lookups": int(meta.get("failed_host_stub_lookups", 0)),
        "first_host_stub_error": int(meta.get("first_host_stub_error", 0)),
        "driver_launch_callbacks": int(meta.get("driver_launch_callbacks", 0)),
        "nested_launch_callbacks": int(meta.get("nested_launch_callbacks", 0)),
        "driver_param_layouts": meta.get("driver_param_layouts", ""),
        "activity_source": meta.get("activity_source", ""),
    }
    return problems, summary


def print_summary(summary):
    print(f"trace: {summary['blocks']} blocks, {summary['ops']} ops, iterations of "
          f"{summary['iterations']} ops, {summary['distinct_kernels']} distinct kernels")
    print(f"  kinds {summary['kinds']}, phases {summary['phases']}, accesses {summary['accesses']}")
    print(f"  {summary['ops_with_duration']} ops with a measured duration; "
          f"{summary['launches_without_param_layout']} launches without a parameter layout, "
          f"{summary['failed_host_stub_lookups']} host stubs the runtime could not resolve "
          f"(first error {summary['first_host_stub_error']}); launch callbacks: "
          f"{summary['driver_launch_callbacks']} from the driver, {summary['nested_launch_callbacks']} nested; "
          f"driver layouts by {summary['driver_param_layouts']}")
    print(f"  source: {summary['activity_source']}")
    callbacks = max(summary["recorder_callbacks"], 1)
    print(f"recorder overhead: {summary['recorder_overhead_ns'] / 1e6:.3f} ms in its callbacks and hooks "
          f"({summary['recorder_callbacks']} callbacks, {summary['recorder_callback_ns'] / callbacks:.0f} ns each, "
          f"{summary['recorder_overhead_per_op_ns']} ns per recorded op); CUPTI's own overhead records: "
          f"{summary['cupti_overhead_ns'] / 1e6:.3f} ms")


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------

def run_mode(args, mode, trace_path):
    env = dict(os.environ)
    env.update({"DELTA_MODE": mode, "DELTA_DEVICE": "cuda", "DELTA_TRACE": trace_path,
                "DELTA_RECORD_ITERATIONS": str(RECORDED_ITERATIONS),
                "CUBLAS_WORKSPACE_CONFIG": ":4096:8"})  # deterministic cuBLAS: equal losses
    env.setdefault("DELTA_LOG_LEVEL", "info")  # the recorder says which CUPTI it loaded
    for rank_variable in ("RANK", "LOCAL_RANK"):
        env.pop(rank_variable, None)
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--lib", args.lib, "--steps", str(args.steps),
               "--model", args.model]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - started
    sys.stderr.write(done.stderr[-4000:])
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} run failed (exit {done.returncode})")
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            result["wall_s"] = wall
            return result
    raise RuntimeError(f"the {mode} run printed no result")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lib", help="path of libdelta.so")
    parser.add_argument("--steps", type=int, default=6, help="training steps per run (>= 3)")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per run")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--check-trace", help="only check this trace file")
    parser.add_argument("--model", choices=("mlp", "gpt2"), default="mlp",
                        help="the small residual MLP (default) or GPT-2 small, batch 8 x 512 tokens")
    parser.add_argument("--keep-trace", help="copy the recorded trace here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        run_worker(args)
        return 0
    if args.check_trace:
        problems, summary = check_trace(args.check_trace)
        print_summary(summary)
        for problem in problems:
            print(f"FAIL: {problem}")
        return 1 if problems else 0
    if not args.lib or not os.path.exists(args.lib):
        parser.error(f"--lib must name the built libdelta.so (got {args.lib!r})")
    if args.steps < RECORDED_ITERATIONS + 1:
        parser.error(f"--steps must be at least {RECORDED_ITERATIONS + 1}")

    with tempfile.TemporaryDirectory(prefix="delta_record_") as scratch:
        trace_path = os.path.join(scratch, "trace.json")
        cache = run_mode(args, "cache", trace_path)
        if os.path.exists(trace_path):
            print("FAIL: DELTA_MODE=cache wrote a trace")
            return 1
        record = run_mode(args, "record", trace_path)
        if not os.path.exists(trace_path):
            print(f"FAIL: DELTA_MODE=record wrote no trace at {trace_path}")
            return 1
        problems, summary = check_trace(trace_path, RECORDED_ITERATIONS)
        if args.keep_trace:
            shutil.copyfile(trace_path, args.keep_trace)
            print(f"recorded trace kept at {args.keep_trace}")

    print_summary(summary)
    # Step 0 carries CUDA and cuBLAS warm-up in both runs; step 1 is recorded, later ones not.
    cache_steady = statistics.median(cache["times"][1:])
    recorded_step = record["times"][1]
    after_recording = statistics.median(record["times"][RECORDED_ITERATIONS:])
    print(f"step time: cache {cache_steady * 1e3:.2f} ms, recorded {recorded_step * 1e3:.2f} ms "
          f"({(recorded_step / cache_steady - 1) * 100:+.1f}%), after recording {after_recording * 1e3:.2f} ms "
          f"({(after_recording / cache_steady - 1) * 100:+.1f}%)")
    if cache["losses"] != record["losses"]:
        problems.append("the losses differ between the cache and the record run: recording changed the computation")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "cache": cache, "record": record, "problems": problems}, f, indent=2)
    for problem in problems:
        print(f"FAIL: {problem}")
    print("RECORD SMOKE PASSED" if not problems else "RECORD SMOKE FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
