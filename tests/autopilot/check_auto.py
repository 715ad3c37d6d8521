"""Reads `deltactl execute --auto --json` on stdin: identical to cache mode, no access to
unmapped memory, the reserved peak within the budget over every iteration, and a plan that
took over after at least one iteration under the online policy. Exit 1 naming what failed."""
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
if not r.get("planned_after"):
    failures.append(f"no plan took over: {r.get('refused')}")
print(json.dumps({k: r.get(k) for k in ("identical", "unmapped_accesses", "reserved_peak_bytes", "budget_bytes",
                                        "planned_after", "online_step_time_ns", "step_time_ns", "cache_step_time_ns")}))
for f in failures:
    print("check_auto:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
