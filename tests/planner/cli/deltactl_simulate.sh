#!/bin/sh
# deltactl simulate end to end: a written plan runs (exit 0), is refused for another trace
# (exit 1), and does not run under a smaller budget than it was made for (exit 2).
# Usage: deltactl_simulate.sh DELTACTL TRACE OTHER_TRACE
set -u
deltactl=$1 trace=$2 other=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

"$deltactl" plan "$trace" --budget 0.5 -o "$dir/plan.json" >/dev/null 2>&1 || fail "plan"
out=$("$deltactl" simulate "$trace" "$dir/plan.json" 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "simulate exited $rc"
echo "$out" | grep -q 'reserved peak' || fail "no allocator figures"

out=$("$deltactl" simulate "$other" "$dir/plan.json" 2>&1); rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "another trace: exit $rc"
echo "$out" | grep -q 'made for another trace' || fail "another trace: no clear message"

sed 's/"budget_bytes": *[0-9]*/"budget_bytes": 1000000000/' "$dir/plan.json" > "$dir/small.json"
out=$("$deltactl" simulate "$trace" "$dir/small.json" --json 2>&1); rc=$?
echo "$out"
[ $rc -eq 2 ] || fail "smaller budget: exit $rc"
echo "$out" | grep -q '"feasible":false' || fail "smaller budget: not reported infeasible"
echo "$out" | grep -q 'budget exceeded' || fail "smaller budget: no first offending event"

# The timeline: one entry per op for a plan that runs, within the budget; for one that does
# not, the ops before the failure; never a partial file.
"$deltactl" simulate "$trace" "$dir/plan.json" --timeline "$dir/timeline.json" >/dev/null 2>&1 || fail "timeline: simulate"
python3 - "$dir/timeline.json" <<'PY' || fail "timeline: contents"
import json, sys
t = json.load(open(sys.argv[1]))
ops = t["ops"]
n = len(ops["name"])
assert t["format"] == "delta-plan-timeline" and t["feasible"], t.get("error")
assert n > 0 and all(len(column) == n for column in ops.values()), "columns differ in length"
assert max(ops["peak_bytes"]) <= t["budget_bytes"], "over the budget"
assert t["through_allocator"] and max(ops["reserved_bytes"]) <= t["budget_bytes"], "the allocator over the budget"
assert all(h <= r for h, r in zip(ops["held_bytes"], ops["reserved_bytes"])), "held more than reserved"
# Idle pages are part of what is reserved, and never hold what the op holds.
assert all(h + u <= r for h, u, r in zip(ops["held_bytes"], ops["unused_page_bytes"], ops["reserved_bytes"])), "idle pages overlap held bytes"
assert any(u > 0 for u in ops["unused_page_bytes"]), "no idle page at any op"
assert all(h <= p for h, p in zip(ops["held_bytes"], ops["peak_bytes"]))
assert ops["end_ns"][-1] <= t["step_ns"]
copies = t["copies"]
k = len(copies["to_host"])
assert k > 0 and all(len(column) == k for column in copies.values()), "copy columns differ in length"
assert all(0 <= s < e <= t["step_ns"] for s, e in zip(copies["start_ns"], copies["end_ns"])), "a copy outside the step"
for lane in (True, False):  # one lane each way: the copies of a direction never overlap
    spans = sorted((s, e) for d, s, e in zip(copies["to_host"], copies["start_ns"], copies["end_ns"]) if d == lane)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "copies overlap on a lane"
print("timeline:", n, "ops, most held", max(ops["peak_bytes"]), "of", t["budget_bytes"], ";", k, "copies")
PY
"$deltactl" simulate "$trace" "$dir/small.json" --timeline "$dir/small-timeline.json" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "timeline of a failing plan: exit $rc"
python3 - "$dir/small-timeline.json" <<'PY' || fail "timeline of a failing plan: contents"
import json, sys
t = json.load(open(sys.argv[1]))
assert not t["feasible"] and "budget exceeded" in t["error"]
assert len(t["ops"]["name"]) == t["first_bad_op"], "should stop at the failing op"
PY
ls "$dir"/*.tmp.* >/dev/null 2>&1 && fail "a partial file was left"
"$deltactl" simulate "$trace" "$dir/plan.json" --timeline "$dir/no/such/dir/t.json" >/dev/null 2>&1 && fail "an unwritable timeline path was accepted"

# Drawn: the HTML page names the figures and embeds the picture (skipped only where no Python
# with matplotlib is found). Paths are passed without a shell.
page="$dir/it's a page.html"
out=$(TMPDIR="$dir" "$deltactl" simulate "$trace" "$dir/plan.json" --html "$page" 2>&1); rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q matplotlib; then
  echo "drawing skipped: no matplotlib"
else
  [ $rc -eq 0 ] || fail "html: exit $rc: $out"
  grep -q "<th>replayed compute</th>" "$page" || fail "html: no figures"
  grep -q "data:image/png;base64," "$page" || fail "html: no picture"
  ls "$dir"/delta-timeline-* >/dev/null 2>&1 && fail "html: the temporary timeline was left"
fi
exit 0
