"""Checks `deltactl execute --json` output read from stdin: identical to cache mode, no
unmapped access, the reserved peak within the budget (not with --data-only), and (with
--diverged) that the program strayed and was caught. Prints the object and exits 1 on the first failed check, naming it."""
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
if "--diverged" in sys.argv:
    checks.append(("the program strayed and the executor saw it", result["divergences"] > 0))
for name, ok in checks:
    if not ok:
        print(f"check failed: {name}", file=sys.stderr)
        sys.exit(1)
