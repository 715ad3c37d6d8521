"""Checks `deltactl execute --json` output read from stdin: identical to cache mode, no
unmapped access, the reserved peak within the budget (not with --data-only), and (with
--diverged) that the program strayed and was caught, (with --phases) that the step by phase adds
up under the plan and in cache mode, and (with --within-prediction F) that the
executed step is within the fraction F of the plan's predicted step. Prints the object and exits 1 on the first failed check, naming it."""
import json
import sys

result = json.load(sys.stdin)
print(json.dumps(result, indent=1, sort_keys=True))
checks = [
    ("identical to cache mode", result["identical"] is True),
    ("no unmapped access", result["unmapped_accesses"] == 0),
]
# --data-only: cases where the executor does not yet hold the budget through the allocator
# (docs/executor.md, "Where it falls short"); their data are still checked.
if "--data-only" not in sys.argv:
    checks.append(("reserved peak within the budget", result["reserved_peak_bytes"] <= result["budget_bytes"]))
# Where the trace has phases (the DTR logs: forward, backward), they and the wait after the last
# op make up each run's step, under the plan and in cache mode.
if "--phases" in sys.argv:
    phases = result.get("phases", [])
    checks.append(("the step by phase", [p["phase"] for p in phases][:2] == ["forward", "backward"]))
    if phases:
        checks.append(("the phases add up to the step under the plan",
                       sum(p["step_ns"] for p in phases) + result["end_wait_ns"] == result["step_time_ns"]))
        checks.append(("the phases add up to the step in cache mode",
                       sum(p["cache_step_ns"] for p in phases) + result["cache_end_wait_ns"] == result["cache_step_time_ns"]))
if "--diverged" in sys.argv:
    checks.append(("the program strayed and the executor saw it", result["divergences"] > 0))
if "--within-prediction" in sys.argv:
    allowed = float(sys.argv[sys.argv.index("--within-prediction") + 1])
    ratio = result["step_time_ns"] / result["predicted_step_time_ns"]
    print(f"step/predicted: {ratio:.4f}")
    checks.append((f"the step within {allowed} of the prediction (step/predicted {ratio:.4f})", abs(ratio - 1) <= allowed))
for name, ok in checks:
    if not ok:
        print(f"check failed: {name}", file=sys.stderr)
        sys.exit(1)
