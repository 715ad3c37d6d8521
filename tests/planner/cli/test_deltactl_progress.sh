#!/usr/bin/env bash
# Progress of long work on stderr: one plain line a step when stderr is not a terminal (here,
# a file), a bar redrawn in place on a terminal (forced with DELTA_PROGRESS=bar), nothing with
# DELTA_PROGRESS=off; stdout, the table, is the same in all three and never cut by the bar.
#   test_deltactl_progress.sh DELTACTL DTR_LOG
set -euo pipefail
deltactl="$1"
log="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck disable=SC2054  # the commas are deltactl's list separator
compare=(compare "$log" --budgets 0.8,0.6 --methods delta,vdnn --search-rounds 0 --no-search-from-bound)

"$deltactl" "${compare[@]}" >"$tmp/lines.out" 2>"$tmp/lines.err"
cat "$tmp/lines.err"
for step in 1 2 3 4; do
  grep -Eq "^deltactl: compare \[$step/4, [0-9]+s\]: unet-.* at 0\.[86]0: (delta|vdnn)$" "$tmp/lines.err" ||
    fail "compare: no plain line for step $step of 4"
done
[[ $(grep -c '^deltactl: compare \[' "$tmp/lines.err") == 4 ]] || fail "compare: not one line a step"
grep -q $'\r' "$tmp/lines.err" && fail "compare drew a bar into a file"

DELTA_PROGRESS=bar "$deltactl" "${compare[@]}" >"$tmp/bar.out" 2>"$tmp/bar.err"
grep -q $'\r\033\\[Kcompare \\[#*\\.*\\] [0-3]/4 ' "$tmp/bar.err" || fail "compare: no bar with DELTA_PROGRESS=bar"
[[ $(tail -c 4 "$tmp/bar.err" | od -An -c | tr -d ' ') == *'\r033[K' ]] || fail "compare: the bar was left on the screen"
DELTA_PROGRESS=off "$deltactl" "${compare[@]}" >"$tmp/off.out" 2>"$tmp/off.err"
grep -q 'compare' "$tmp/off.err" && fail "compare: progress with DELTA_PROGRESS=off"
cmp -s "$tmp/lines.out" "$tmp/bar.out" && cmp -s "$tmp/lines.out" "$tmp/off.out" || fail "compare: the table depends on the progress style"
grep -Eq '^    0\.60( +([0-9.]+|infeasible)){2}$' "$tmp/lines.out" || fail "compare: a row of the table is cut"

"$deltactl" bound "$log" --budgets 0.5,0.4 >"$tmp/bound.out" 2>"$tmp/bound.err"
grep -Eq '^deltactl: bound \[2/2, [0-9]+s\]: unet-.* at 0\.40$' "$tmp/bound.err" || fail "bound: no plain line a step"
[[ $(grep -c '>= ' "$tmp/bound.out") == 2 ]] || fail "bound: the table lost a row"
# Where the planning time went, asked for: a tree of stages after the plan, the plan the same.
plan=(plan "$log" --budget 0.6 --search-rounds 0 --no-search-from-bound --threads 2)
"$deltactl" "${plan[@]}" -o "$tmp/plain.json" >"$tmp/plain.out" 2>/dev/null
"$deltactl" "${plan[@]}" -o "$tmp/timed.json" --timings >"$tmp/timed.out" 2>/dev/null
grep -q 'where the planning time went' "$tmp/plain.out" && fail "plan: timings without --timings"
grep -Eq '^  where the planning time went: [0-9.]+ CPU s over all threads, [1-9][0-9]* simulations$' "$tmp/timed.out" ||
  fail "plan --timings: no summary line"
grep -Eq '^ +[0-9.]+ +[0-9.]+ +[0-9]+ +[1-9][0-9]* +  +fitted to the allocator$' "$tmp/timed.out" ||
  fail "plan --timings: no row for the fitting, indented under the plan it belongs to"
cmp -s "$tmp/plain.json" "$tmp/timed.json" || fail "plan --timings changed the plan"
echo "progress: lines when piped, a bar on a terminal, the table untouched; plan --timings"
