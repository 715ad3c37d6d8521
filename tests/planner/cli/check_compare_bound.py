"""`deltactl compare --bound --json`: beside each method's row, a row of method "bound" per
budget, judged as the methods are, so that no plan is below it; where the bound proves the
budget unreachable, no method has a plan. Usage: check_compare_bound.py DELTACTL LOG."""

import json
import subprocess
import sys

deltactl, log = sys.argv[1], sys.argv[2]
out = subprocess.run([deltactl, "compare", log, "--methods", "delta,capuchin", "--budgets", "0.3,0.2", "--bound", "--json"],
                     check=True, capture_output=True, text=True).stdout
rows = [json.loads(line) for line in out.splitlines() if line.strip()]
by = {(r["budget_ratio"], r["method"]): r for r in rows}
assert len(rows) == 6, f"expected 2 budgets x (2 methods + bound), got {len(rows)}: {out}"
bound = by[(0.3, "bound")]
assert bound["reachable"] is True and bound["overhead_lower_bound"] >= 1.0, bound
assert by[(0.3, "delta")]["feasible"], by[(0.3, "delta")]
for method in ("delta", "capuchin"):
    plan = by[(0.3, method)]
    if not plan["feasible"]:
        continue
    assert plan["overhead"] >= bound["overhead_lower_bound"] - 1e-9, (plan, bound)
assert by[(0.2, "bound")]["reachable"] is False, by[(0.2, "bound")]
assert not by[(0.2, "delta")]["feasible"] and not by[(0.2, "capuchin")]["feasible"]
# The table gains a column of its own.
table = subprocess.run([deltactl, "compare", log, "--methods", "delta", "--budgets", "0.2", "--bound"],
                       check=True, capture_output=True, text=True).stdout
assert "bound" in table.splitlines()[1] and "unreachable" in table.splitlines()[2], table
print("ok")
