#!/usr/bin/env python3
"""Directions learned on a real GPU: GPT-2 small recorded under LD_PRELOAD with learning iterations.

Each run is a process of its own (LD_PRELOAD=libdelta.so, PYTORCH_CUDA_ALLOC_CONF=
backend:cudaMallocAsync, delta_step() after every step); every figure is appended to --jsonl
as soon as it exists, so a run cut short still reports what it measured:

  cache    DELTA_MODE=cache: the reference step time
  record   DELTA_MODE=record, DELTA_RECORD_ITERATIONS=3, no learning: the recording's step time
           with launches recorded by the driver wrappers (target: <= 1.10x cache)
  learn    DELTA_MODE=record, DELTA_RECORD_ITERATIONS=4, DELTA_LEARNING_ITERATIONS=2: the two
           learning iterations' step times apart, the recorded iterations after them against
           cache, the trace's read / write / touch shares (deltactl trace info), the learner's
           metadata
  plan     deltactl plan TRACE --budget 0.5: the predicted overhead in the simulator, for the
           learned trace and the unlearned one

Fails when a run fails, no trace is written, or the learned trace has no read or write use.
The 1.10x target is reported (record_over_cache), not enforced: it is what this stage measures.

usage: learn_smoke.py --lib build-gpu/src/libdelta.so --deltactl build-gpu/tools/deltactl/deltactl
                      [--steps 8] [--jsonl out.jsonl] [--scratch DIR] [--timeout 120]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def run_worker(args):
    import ctypes
    import torch
    from record_smoke import build_gpt2

    lib = ctypes.CDLL(args.lib)  # the preloaded instance
    lib.delta_step.restype = ctypes.c_int
    lib.delta_last_error.restype = ctypes.c_char_p
    torch.manual_seed(1234)
    model, vocabulary = build_gpt2(torch)
    model = model.cuda()
    tokens = torch.randint(0, vocabulary, (8, 512), device="cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for _ in range(args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        loss.item()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if lib.delta_step() != 0:
            raise RuntimeError(f"delta_step failed: {lib.delta_last_error().decode()}")
    print("RESULT " + json.dumps({"times": times}), flush=True)


def launch(args, mode, env_extra):
    env = dict(os.environ)
    for key in ("DELTA_MODE", "DELTA_TRACE", "DELTA_RECORD_ITERATIONS", "DELTA_LEARNING_ITERATIONS", "RANK",
                "LOCAL_RANK"):
        env.pop(key, None)
    env.update({"LD_PRELOAD": os.path.abspath(args.lib), "DELTA_DEVICE": "cuda",
                "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    env.setdefault("DELTA_LOG_LEVEL", "info")
    env.update(env_extra)
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--lib", args.lib, "--steps", str(args.steps)]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    sys.stderr.write(done.stderr[-3000:])
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} run failed (exit {done.returncode})")
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            result["wall_s"] = time.perf_counter() - started
            return result
    raise RuntimeError(f"the {mode} run printed no result")


def trace_uses(deltactl, trace, timeout):
    done = subprocess.run([deltactl, "trace", "info", trace], capture_output=True, text=True, timeout=timeout)
    found = re.search(r"uses:\s+(\d+) read, (\d+) write, (\d+) touch", done.stdout)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"deltactl trace info failed: {done.stderr.strip()[-400:]}")
    read, write, touch = (int(x) for x in found.groups())
    total = max(read + write + touch, 1)
    return {"read": read, "write": write, "touch": touch, "read_share": read / total, "write_share": write / total,
            "touch_share": touch / total}


def trace_metadata(trace):
    try:
        return json.load(open(trace)).get("metadata", {})
    except (OSError, ValueError):
        return {}


def plan_overhead(deltactl, trace, scratch, name, timeout):
    plan = os.path.join(scratch, f"{name}_plan_0.5.json")
    done = subprocess.run([deltactl, "plan", trace, "--budget", "0.5", "-o", plan], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-400:]}
    predicted = json.load(open(plan)).get("predicted", {})
    return {"predicted_overhead": predicted.get("overhead")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lib")
    parser.add_argument("--deltactl")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--jsonl", default="learn_smoke.jsonl")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help="keep the traces and plans here (default: a temporary folder)")
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return 0
    for path, what in ((args.lib, "--lib"), (args.deltactl, "--deltactl")):
        if not path or not os.path.exists(path):
            parser.error(f"{what} must name the built file (got {path!r})")
    if args.steps < 7:
        parser.error("--steps must be at least 7 (two learning, two recorded and cache-speed steps after them)")
    out = open(args.jsonl, "a")

    def emit(record):
        out.write(json.dumps(record) + "\n")
        out.flush()
        print(json.dumps(record)[:800], flush=True)

    scratch = args.scratch or tempfile.mkdtemp(prefix="delta_learn_")
    os.makedirs(scratch, exist_ok=True)
    problems = []

    cache = launch(args, "cache", {"DELTA_MODE": "cache"})
    cache_step = statistics.median(cache["times"][2:])
    emit({"stage": "cache", "step_ms": cache_step * 1e3, "times_ms": [t * 1e3 for t in cache["times"]]})

    # Recording without learning: iterations 0..2 recorded (0 has the first step's set-up).
    plain_trace = os.path.join(scratch, "gpt2_recorded.json")
    try:
        plain = launch(args, "record", {"DELTA_MODE": "record", "DELTA_TRACE": plain_trace,
                                        "DELTA_RECORD_ITERATIONS": "3"})
        recorded = statistics.median(plain["times"][1:3])
        meta = trace_metadata(plain_trace)
        emit({"stage": "record", "step_ms": recorded * 1e3, "record_over_cache": recorded / cache_step,
              "times_ms": [t * 1e3 for t in plain["times"]], "launches_recorded_by": meta.get("launches_recorded_by"),
              "recorder_overhead_per_op_ns": meta.get("recorder_overhead_per_op_ns"),
              "launches_outside_wrappers": meta.get("launches_outside_wrappers"),
              "uses": trace_uses(args.deltactl, plain_trace, args.timeout)})
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        problems.append(f"recording without learning failed: {error}")
        emit({"stage": "record", "error": str(error)})

    # Learning: iterations 0 and 1 learn (1 replays), 2 and 3 are recorded as usual.
    learned_trace = os.path.join(scratch, "gpt2_learned.json")
    try:
        learn = launch(args, "learn", {"DELTA_MODE": "record", "DELTA_TRACE": learned_trace,
                                       "DELTA_RECORD_ITERATIONS": "4", "DELTA_LEARNING_ITERATIONS": "2"})
        times = learn["times"]
        recorded = statistics.median(times[2:4])
        meta = trace_metadata(learned_trace)
        uses = trace_uses(args.deltactl, learned_trace, args.timeout)
        emit({"stage": "learn", "learning_iteration_ms": [t * 1e3 for t in times[:2]],
              "learning_over_cache": [t / cache_step for t in times[:2]],
              "recorded_step_ms": recorded * 1e3, "record_over_cache": recorded / cache_step,
              "after_trace_step_ms": statistics.median(times[4:]) * 1e3, "uses": uses,
              "learner": {k: v for k, v in meta.items() if k.startswith("learn") or k.startswith("swap_only_blocks")
                          or k in ("directions", "launches_outside_wrappers", "recorder_overhead_per_op_ns")}})
        if uses["read"] == 0 or uses["write"] == 0:
            problems.append(f"the learned trace has {uses['read']} read and {uses['write']} write uses")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        problems.append(f"recording with learning failed: {error}")
        emit({"stage": "learn", "error": str(error)})

    for name, trace in (("learned", learned_trace), ("recorded", plain_trace)):
        if os.path.exists(trace):
            emit({"stage": "plan", "trace": name, "budget": 0.5,
                  **plan_overhead(args.deltactl, trace, scratch, name, args.timeout)})

    for problem in problems:
        print(f"FAIL: {problem}")
    print("LEARN SMOKE PASSED" if not problems else "LEARN SMOKE FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
