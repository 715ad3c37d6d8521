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
