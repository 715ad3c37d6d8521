"""Runs DTR's own simulator beside DELTA's DTR baseline on DTR op logs and checks they agree.

DTR's simulator is `simrd` from the public uwsampl/dtr-prototype repository; this script
imports it from a checkout given with --simrd (the repository's `simrd` folder) and runs, per
log and budget ratio, its DTREqClass heuristic on RuntimeV2EagerOptimized, the configuration
of the paper's main results, with its budgets taken as ratios of its own baseline peak and its
2x overhead limit. DELTA's side is `deltactl compare --methods dtr --json` at the same ratios
(the two peaks differ by a few hundred bytes in ten gigabytes). It prints one row per log and
ratio and exits with status 1 when a pair disagrees: one feasible and the other not, or
overheads further apart than --tolerance of simrd's.

  python3 tools/simrd/compare_dtr.py --simrd ~/dtr-prototype/simrd ../shared/traces/dtr/*.log

Needs the `attrs` package, which simrd imports.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time


def load_simrd(path):
    if not os.path.isdir(os.path.join(path, "simrd", "runtime")):
        sys.exit(f"--simrd {path}: not the simrd folder of a dtr-prototype checkout (no simrd/runtime inside)")
    sys.path.insert(0, path)
    try:
        import simrd.heuristic as heuristic
        import simrd.parse as parse
        import simrd.runtime as runtime
    except ImportError as e:
        sys.exit(f"cannot import simrd from {path}: {e} (it needs the attrs package)")
    return heuristic, parse, runtime


def has_start_marker(log):
    with open(log, encoding="utf-8") as f:
        return any('"ANNOTATE"' in line and "START" in line for line in f)


def run_simrd(simrd, log, ratios):
    heuristic, parse, runtime = simrd
    with open(log, encoding="utf-8") as f:
        graph = parse.parse_file(f, start=has_start_marker(log))
    step = graph.get_closure()
    baseline = runtime.RuntimeV1(math.inf, heuristic.Heuristic(), stats=False, trace=False)
    step(baseline)
    peak = baseline.telemetry.summary["max_memory"]
    compute = baseline.telemetry.summary["model_compute"]
    results = {}
    for ratio in ratios:
        rt = runtime.RuntimeV2EagerOptimized(int(peak * ratio), heuristic.DTREqClass(), stats=False, trace=False,
                                             remat_limit=compute)  # the paper's limit: 2x the step
        started = time.time()
        try:
            step(rt)
            results[ratio] = {"feasible": True, "overhead": rt.clock / compute}
        except MemoryError:
            results[ratio] = {"feasible": False, "overhead": None, "why": "out of memory"}
        except runtime.RematExceededError:
            results[ratio] = {"feasible": False, "overhead": None, "why": "over 2x the step"}
        results[ratio]["seconds"] = round(time.time() - started, 2)
    return peak, results


def run_delta(deltactl, log, ratios):
    command = [deltactl, "compare", log, "--methods", "dtr", "--json", "--budgets", ",".join(str(r) for r in ratios)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed: {done.stderr.strip()}")
    results = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        results[row["budget_ratio"]] = {"feasible": row["feasible"], "overhead": row["overhead"]}
    return results


def agree(theirs, ours, tolerance):
    if theirs.get("why") == "over 2x the step" and ours["feasible"] and ours["overhead"] >= 2.0:
        return True, None  # simrd gives up past twice the step; DELTA's DTR has no such limit
    if theirs["feasible"] != ours["feasible"]:
        return False, None
    if not theirs["feasible"]:
        return True, None
    difference = abs(ours["overhead"] - theirs["overhead"]) / theirs["overhead"]
    return difference <= tolerance, difference


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", help="DTR op logs")
    parser.add_argument("--simrd", required=True, help="the simrd folder of a uwsampl/dtr-prototype checkout")
    parser.add_argument("--deltactl", default="build/tools/deltactl/deltactl", help="the deltactl binary")
    parser.add_argument("--budgets", default="0.8,0.6,0.5,0.4,0.3", help="budget ratios, comma-separated")
    parser.add_argument("--tolerance", type=float, default=0.05, help="relative difference of overheads allowed")
    parser.add_argument("--json", action="store_true", help="one JSON object per log and ratio")
    args = parser.parse_args()
    try:
        ratios = [float(r) for r in args.budgets.split(",")]
    except ValueError:
        sys.exit(f"--budgets {args.budgets}: not a comma-separated list of numbers")
    if any(not 0 < r <= 1 for r in ratios):
        sys.exit(f"--budgets {args.budgets}: ratios must lie in (0, 1]")
    if not os.access(args.deltactl, os.X_OK):
        sys.exit(f"--deltactl {args.deltactl}: not an executable (build it, or pass its path)")
    simrd = load_simrd(args.simrd)
    # simrd rematerializes recursively through long chains: run it on a thread with a large
    # stack, so that deep recursion raises instead of overflowing the C stack.
    sys.setrecursionlimit(1_000_000)
    threading.stack_size(1 << 29)
    outcome = {}

    def run():
        try:
            outcome["code"] = compare(args, ratios, simrd)
        except SystemExit as e:  # a thread swallows SystemExit: report it here
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
            outcome["code"] = e.code if isinstance(e.code, int) else 1

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    sys.exit(outcome.get("code", 2))


def compare(args, ratios, simrd):
    disagreements = 0
    if not args.json:
        print(f"{'log':<16} {'ratio':>5} {'simrd':>8} {'delta dtr':>10} {'difference':>10}")
    for log in args.logs:
        name = os.path.basename(log).split("-")[0]
        _, theirs = run_simrd(simrd, log, ratios)
        ours = run_delta(args.deltactl, log, ratios)
        for ratio in ratios:
            ok, difference = agree(theirs[ratio], ours[ratio], args.tolerance)
            disagreements += not ok
            if args.json:
                print(json.dumps({"log": name, "budget_ratio": ratio, "simrd": theirs[ratio], "delta_dtr": ours[ratio],
                                  "relative_difference": difference, "agree": ok}))
                continue
            cell = lambda r: f"{r['overhead']:.4f}" if r["feasible"] else "infeasible"
            diff = f"{difference:.2%}" if difference is not None else "-"
            print(f"{name:<16} {ratio:>5} {cell(theirs[ratio]):>8} {cell(ours[ratio]):>10} {diff:>10}"
                  f"{'' if ok else '  DISAGREE'}")
    if not args.json:
        print(f"{disagreements} disagreement(s) beyond {args.tolerance:.0%}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    main()
