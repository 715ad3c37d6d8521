#!/usr/bin/env python3
"""DELTA_MODE=run on a real GPU: GPT-2 small trained under a plan, through the driver route.

Each run is a process of its own; every figure is appended to --jsonl as soon as it exists:

  native   PyTorch's own allocator: losses, step times, peak reserved memory
  record   LD_PRELOAD=libdelta.so (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync),
           DELTA_MODE=record: three iterations recorded with CUPTI
  plan     deltactl plan TRACE --budget B --executor-placement, for each B (default 0.6 and 0.4
           of the recorded iteration's peak)
  run      LD_PRELOAD=libdelta.so, DELTA_MODE=run DELTA_PLAN DELTA_TRACE: the same training
  auto     LD_PRELOAD=libdelta.so, DELTA_MODE=auto DELTA_BUDGET (--auto-budget of native's
           reserved peak, in bytes), no plan given, no plan cache: the same training, the online
           policy first, then the plan made in-process from the steps it recorded with CUPTI

Checks per budget: every step's loss bitwise equal to native's; DELTA's reserved peak over the
steady steps (after the warm-up steps, whose allocations differ from the recorded iteration)
within the plan's budget; the plan was followed (launch route live, no step strayed after the
warm-up). Reports the steady step time against native and against the plan's prediction.
Auto: every loss bitwise equal to native's and launches through the route; reported: the step
the plan took over after, DELTA's reserved peak over the budget, steps served above it.

usage: run_smoke.py --lib build-gpu/src/libdelta.so --deltactl build-gpu/tools/deltactl/deltactl
                    [--steps 20] [--budgets "0.6 0.4"] [--auto-budget 0.6] [--jsonl out.jsonl] [--timeout 120]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WARMUP = 2  # steps before the peak is reset: CUDA, cuBLAS and the optimizer's first step


def run_worker(args):
    import ctypes
    import torch
    from record_smoke import build_gpt2
    from torch_smoke import delta_stats

    lib = None
    if args.mode != "native":
        lib = ctypes.CDLL(args.lib)  # the preloaded instance
        lib.delta_step.restype = ctypes.c_int
        lib.delta_last_error.restype = ctypes.c_char_p
    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    model, vocabulary = build_gpt2(torch)
    model = model.cuda()
    tokens = torch.randint(0, vocabulary, (8, 512), device="cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times, losses = [], []
    for step in range(args.steps):
        if step == WARMUP:
            torch.cuda.reset_peak_memory_stats()
            if lib is not None:
                lib.delta_reset_peak_stats()
        torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item().hex())  # exact, for a bitwise comparison
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if lib is not None and lib.delta_step() != 0:
            raise RuntimeError(f"delta_step failed: {lib.delta_last_error().decode()}")
    result = {"times": times, "losses": losses, "torch_reserved_peak": torch.cuda.max_memory_reserved()}
    if lib is not None:
        result["delta"] = delta_stats(args.lib)
    print("RESULT " + json.dumps(result), flush=True)


def launch(args, mode, env_extra, steps):
    env = dict(os.environ)
    for key in ("LD_PRELOAD", "DELTA_MODE", "DELTA_PLAN", "DELTA_TRACE", "DELTA_BUDGET", "DELTA_PLAN_CACHE",
                "PYTORCH_CUDA_ALLOC_CONF", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    if mode != "native":
        env.update({"LD_PRELOAD": os.path.abspath(args.lib), "DELTA_DEVICE": "cuda",
                    "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
        env.setdefault("DELTA_LOG_LEVEL", "info")
    env.update(env_extra)
    command = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--lib", args.lib, "--steps", str(steps)]
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


def run_auto(args, native, native_step, emit, problems):
    budget = int(float(args.auto_budget) * native["torch_reserved_peak"])
    try:
        run = launch(args, "auto", {"DELTA_MODE": "auto", "DELTA_BUDGET": str(budget), "DELTA_PLAN_CACHE": "off",
                                    "DELTA_RECORD_ITERATIONS": "2"}, args.steps)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        problems.append(f"the auto run at {args.auto_budget} failed: {error}")
        emit({"stage": "auto", "budget": args.auto_budget, "error": str(error)})
        return
    stats = run["delta"]
    auto = stats.get("executor", {})
    route = auto.get("launch_route", {})
    equal = run["losses"] == native["losses"]
    step = statistics.median(run["times"][-3:])  # the last steps: under the plan when one took over
    emit({"stage": "auto", "budget": args.auto_budget, "budget_bytes": budget, "losses_bitwise_equal": equal,
          "first_loss_mismatch": next((i for i, (a, b) in enumerate(zip(run["losses"], native["losses"])) if a != b), None),
          "planned_after": auto.get("planned_after"), "refused": auto.get("refused"),
          "planning_wall_s": auto.get("planning_wall_s"), "program_changes": auto.get("program_changes"),
          "reserved_peak": stats["reserved_peak"], "peak_over_budget": stats["reserved_peak"] / budget,
          "online_budget_exceeded": auto.get("online", {}).get("budget_exceeded"),
          "last_steps_over_native": step / native_step, "launch_route": route})
    if not equal:
        problems.append("auto: losses differ from native")
    if not route.get("launches"):
        problems.append("auto: no launch reached DELTA's route")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lib")
    parser.add_argument("--deltactl")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--budgets", default="0.6 0.4")
    parser.add_argument("--jsonl", default="run_smoke.jsonl")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per run")
    parser.add_argument("--auto-budget", default="0.6",
                        help="auto mode's budget as a fraction of native's reserved peak; empty: no auto run")
    parser.add_argument("--worker", choices=("native", "record", "run", "auto"), help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help="keep the trace and plans here (default: a temporary folder)")
    args = parser.parse_args()
    if args.worker:
        args.mode = args.worker
        run_worker(args)
        return 0
    for path, what in ((args.lib, "--lib"), (args.deltactl, "--deltactl")):
        if not path or not os.path.exists(path):
            parser.error(f"{what} must name the built file (got {path!r})")
    if args.steps <= WARMUP + 2:
        parser.error(f"--steps must be above {WARMUP + 2}")

    problems = []
    out = open(args.jsonl, "a")

    def emit(record):
        out.write(json.dumps(record) + "\n")
        out.flush()
        print(json.dumps(record)[:600], flush=True)

    scratch = args.scratch or tempfile.mkdtemp(prefix="delta_run_")
    os.makedirs(scratch, exist_ok=True)
    trace = os.path.join(scratch, "gpt2_trace.json")

    native = launch(args, "native", {}, args.steps)
    native_step = statistics.median(native["times"][WARMUP:])
    emit({"stage": "native", "step_ms": native_step * 1e3, "reserved_peak": native["torch_reserved_peak"]})

    launch(args, "record", {"DELTA_MODE": "record", "DELTA_TRACE": trace, "DELTA_RECORD_ITERATIONS": "3"}, 4)
    if not os.path.exists(trace):
        emit({"stage": "record", "error": "no trace written"})
        return 1
    emit({"stage": "record", "trace": trace, "bytes": os.path.getsize(trace)})

    for budget in args.budgets.split():
        plan = os.path.join(scratch, f"gpt2_plan_{budget}.json")
        done = subprocess.run([args.deltactl, "plan", trace, "--budget", budget, "--executor-placement", "-o", plan],
                              capture_output=True, text=True, timeout=args.timeout)
        if done.returncode != 0:
            problems.append(f"planning at {budget} failed: {done.stderr.strip()[-400:]}")
            emit({"stage": "plan", "budget": budget, "error": done.stderr.strip()[-400:]})
            continue
        planned = json.load(open(plan))
        predicted = planned.get("predicted", {})
        emit({"stage": "plan", "budget": budget, "budget_bytes": planned["budget_bytes"],
              "predicted_overhead": predicted.get("overhead"), "decisions": len(planned.get("decisions", []))})
        try:
            run = launch(args, "run", {"DELTA_MODE": "run", "DELTA_PLAN": plan, "DELTA_TRACE": trace}, args.steps)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            problems.append(f"the run at {budget} failed: {error}")
            emit({"stage": "run", "budget": budget, "error": str(error)})
            continue
        stats = run["delta"]
        executor = stats.get("executor", {})
        route = executor.get("launch_route", {})
        step = statistics.median(run["times"][WARMUP:])
        equal = run["losses"] == native["losses"]
        within = stats["reserved_peak"] <= planned["budget_bytes"]
        record = {"stage": "run", "budget": budget, "losses_bitwise_equal": equal,
                  "first_loss_mismatch": next((i for i, (a, b) in enumerate(zip(run["losses"], native["losses"])) if a != b), None),
                  "reserved_peak": stats["reserved_peak"], "budget_bytes": planned["budget_bytes"],
                  "peak_over_budget": stats["reserved_peak"] / planned["budget_bytes"],
                  "step_ms": step * 1e3, "step_over_native": step / native_step,
                  "step_over_predicted": (step / native_step) / predicted["overhead"] if predicted.get("overhead") else None,
                  "swaps": executor.get("swaps"), "divergences": executor.get("divergences"),
                  "last_divergence": executor.get("last_divergence"), "launch_route": route}
        emit(record)
        if not equal:
            problems.append(f"budget {budget}: losses differ from native from step {record['first_loss_mismatch']}")
        if not within:
            problems.append(f"budget {budget}: reserved peak {stats['reserved_peak']} over the budget {planned['budget_bytes']}")
        if not route.get("launches"):
            problems.append(f"budget {budget}: no launch reached DELTA's route")
        if executor.get("divergences", 0) > WARMUP:
            problems.append(f"budget {budget}: {executor['divergences']} steps strayed from the plan "
                            f"(last: {executor.get('last_divergence')})")
    if args.auto_budget:
        run_auto(args, native, native_step, emit, problems)
    for problem in problems:
        print(f"FAIL: {problem}")
    print("RUN SMOKE PASSED" if not problems else "RUN SMOKE FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
