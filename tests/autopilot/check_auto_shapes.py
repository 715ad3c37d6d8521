"""Reads `deltactl execute --auto --shapes ... --json` on stdin: what check_auto.py asks, and a
plan per shape, each taking over (plan_switches at least one per shape and per return to it),
the program's changes counted, and each shape's last step under its plan within 10% of its
prediction times the calibration of its first judged step. Exit 1 naming what failed."""
import json
import sys

r = json.load(sys.stdin)
failures = []
if not r["identical"]:
    failures.append(f"differs from cache mode at {r['first_mismatch']} ({r['error']})")
if r["unmapped_accesses"] != 0:
    failures.append(f"{r['unmapped_accesses']} accesses to unmapped memory")
if r["reserved_peak_bytes"] > r["budget_bytes"]:
    failures.append(f"reserved peak {r['reserved_peak_bytes']} over the budget {r['budget_bytes']}")
scales = r.get("shape_scales", [])
if len(r["shapes"]) != len(scales):
    failures.append(f"{len(r['shapes'])} shapes planned for {len(scales)} scales")
runs = sum(1 for i, s in enumerate(r["shape_of_iteration"]) if i == 0 or s != r["shape_of_iteration"][i - 1])
if r["plan_switches"] < runs:
    failures.append(f"{r['plan_switches']} plan switches for {runs} runs of shapes")
if r["program_changes"] < runs - 1:
    failures.append(f"{r['program_changes']} program changes seen for {runs - 1} changes of shape")
if r["replans"] != len(scales) - 1 or r["timing_replans"] != 0:
    failures.append(f"{r['replans']} replans ({r['timing_replans']} for time), expected {len(scales) - 1} (0)")
for s in r["shapes"]:
    if s["plan_from"] is None or not s["calibration"]:
        failures.append(f"shape {s['key']}: no plan ran a judged step ({s['refused']})")
    elif abs(s["last_over_predicted"] / s["calibration"] - 1) > 0.10:
        failures.append(f"shape {s['key']}: last step {s['last_over_predicted']} x its prediction, calibrated at {s['calibration']}")
print(json.dumps({k: r.get(k) for k in ("identical", "unmapped_accesses", "reserved_peak_bytes", "budget_bytes",
                                        "plans_made", "replans", "plan_switches", "program_changes", "shapes")}))
for f in failures:
    print("check_auto_shapes:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
