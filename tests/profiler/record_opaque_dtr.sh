#!/bin/sh
# deltactl execute --record --opaque end to end on a small DTR log: the program recorded with
# kernels that show only their parameter bytes, its directions learned, held against the
# sim's ground truth: at least 99% of kernel uses get their true direction, none is unsafe
# (exit 2 would say so), `trace info` counts the learned reads and writes, and the plan from
# the learned directions stays within 2% of the plan from the true ones at half the peak.
# Usage: record_opaque_dtr.sh DELTACTL LOG
set -u
deltactl=$1 log=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

out=$("$deltactl" execute "$log" --record "$dir/learned.json" --opaque --truth "$dir/truth.json" --iterations 2 --json 2>&1) ||
  fail "record exited $?: $out"
echo "$out"
field() { echo "$out" | sed -n "s/^ *\"$1\": *\([0-9.e+-]*\).*/\1/p"; }
[ "$(field writes_as_reads)" = 0 ] || fail "writes learned as reads"
[ "$(field reads_lost)" = 0 ] || fail "reads lost"
awk -v f="$(field true_direction_fraction)" 'BEGIN { exit !(f >= 0.99) }' || fail "true directions below 99%"

info=$("$deltactl" trace info "$dir/learned.json") || fail "trace info"
echo "$info" | grep 'uses:'
echo "$info" | grep -Eq 'uses: +[1-9][0-9]* read, [1-9][0-9]* write, [0-9]+ touch' || fail "trace info: no read/write counts"

plan() { "$deltactl" plan "$1" --budget 0.5 --search-rounds 0 -o "$dir/plan.json" 2>/dev/null | sed -n 's/.*overhead \([0-9.]*\)).*/\1/p'; }
learned=$(plan "$dir/learned.json") truth=$(plan "$dir/truth.json")
echo "overhead at 0.5: learned $learned, true directions $truth"
[ -n "$learned" ] && [ -n "$truth" ] || fail "no plan"
awk -v l="$learned" -v t="$truth" 'BEGIN { exit !(l <= t * 1.02) }' || fail "the learned plan is more than 2% slower"
