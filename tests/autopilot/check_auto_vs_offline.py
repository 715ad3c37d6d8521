"""Auto mode against the offline plan at the same budget: reads two `deltactl execute --json`
files (auto, offline) and checks the auto run's last step (under its plan) is within the
issue's 10% of the offline plan's, and that both hold the budget. Exit 1 naming what failed."""
import json
import sys

auto, offline = (json.load(open(path)) for path in sys.argv[1:3])
limit = float(sys.argv[3]) if len(sys.argv) > 3 else 1.10
failures = []
for name, r in (("auto", auto), ("offline", offline)):
    if not r["identical"] or r["unmapped_accesses"] != 0:
        failures.append(f"{name}: not identical to cache mode, or touched unmapped memory")
    if r["reserved_peak_bytes"] > r["budget_bytes"]:
        failures.append(f"{name}: reserved peak {r['reserved_peak_bytes']} over the budget {r['budget_bytes']}")
if not auto.get("planned_after"):
    failures.append(f"auto: no plan took over: {auto.get('refused')}")
ratio = auto["step_time_ns"] / offline["step_time_ns"]
print(json.dumps({"auto_step_ns": auto["step_time_ns"], "offline_step_ns": offline["step_time_ns"],
                  "auto_over_offline": round(ratio, 4), "limit": limit}))
if ratio > limit:
    failures.append(f"auto's step is {ratio:.4f} of the offline plan's, over {limit}")
for f in failures:
    print("check_auto_vs_offline:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
