#!/usr/bin/env bash
# One door for every trace: each file of the shared traces goes straight into `deltactl trace
# info` and `deltactl plan`, whatever its kind, recognised by content (a memory snapshot, which
# has no ops by design, is refused by plan with the reason). An Execution Trace with its Kineto
# profile goes through plan, simulate, compare, bound and execute. Files of no known kind, a
# Kineto profile alone and a --kineto without an Execution Trace are refused by name.
#   test_deltactl_every_trace.sh DELTACTL TRACES_DIR
set -euo pipefail
deltactl="$1"
traces="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
quick=(--search-rounds 0 --no-search-from-bound)

count=0
# Every file there but the README and the Kineto profiles (which go with an ET): a trace added
# to the folder is tested without a change here.
while IFS= read -r -d '' file; do
  count=$((count + 1))
  "$deltactl" trace info "$file" >"$tmp/info" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "trace info $file"; }
  grep -Eq '^blocks: +[1-9]' "$tmp/info" || fail "trace info $file: no blocks"
  if grep -Eq '^ops: +0 ' "$tmp/info"; then
    grep -q 'a memory snapshot records allocations, not kernels' "$tmp/info" || fail "trace info $file: 0 ops unexplained"
    if "$deltactl" plan "$file" -o "$tmp/plan.json" 2>"$tmp/err"; then fail "plan accepted $file, which has no ops"; fi
    grep -q 'has no ops (a memory snapshot records allocations, not kernels), and plan needs them' "$tmp/err" ||
      { cat "$tmp/err" >&2; fail "plan $file: refused without the reason"; }
  else
    "$deltactl" plan "$file" --budget 0.7 "${quick[@]}" -o "$tmp/plan.json" >/dev/null 2>"$tmp/err" ||
      { cat "$tmp/err" >&2; fail "plan $file"; }
    test -s "$tmp/plan.json" || fail "plan $file wrote no plan"
  fi
  echo "ok: $(basename "$file")"
done < <(find "$traces" -type f ! -name 'README*' ! -name '*kineto*' -print0 | sort -z)
((count >= 7)) || fail "only $count traces found in $traces"

et="$traces/resnet18_bs128_et.json.gz"
kineto="$traces/resnet18_bs128_kineto.json.gz"
dtr="$(ls "$traces"/dtr/unet-*.log)"
"$deltactl" trace info "$et" --kineto "$kineto" >"$tmp/info"
grep -q '^source: *pytorch-et+kineto' "$tmp/info" || fail "--kineto was not joined"
grep -q '^estimated: *0 of' "$tmp/info" || fail "--kineto: durations still estimated"
"$deltactl" plan "$et" --kineto "$kineto" --budget 0.7 "${quick[@]}" -o "$tmp/et-plan.json" >/dev/null 2>&1
"$deltactl" simulate "$et" "$tmp/et-plan.json" --kineto "$kineto" >/dev/null 2>&1 || fail "simulate ET"
# Without the profile the ET is another trace (estimated durations): the plan is refused for it.
if "$deltactl" simulate "$et" "$tmp/et-plan.json" >/dev/null 2>&1; then fail "simulate took a plan made for another trace"; fi
"$deltactl" compare "$et" "$dtr" --kineto "$kineto" --budgets 0.7 --methods delta --search-rounds 0 >"$tmp/compare" 2>/dev/null
grep -q 'resnet18_bs128_et' "$tmp/compare" || fail "compare ET + DTR"
"$deltactl" bound "$et" --budgets 0.7 >"$tmp/bound" 2>/dev/null
grep -q '>= ' "$tmp/bound" || fail "bound ET"
"$deltactl" execute "$et" --budget 0.7 --iterations 1 >/dev/null 2>&1 || fail "execute ET"
"$deltactl" trace convert "$et" "$tmp/et.json.gz" >/dev/null 2>&1
"$deltactl" trace info "$tmp/et.json.gz" | grep -q '^source: *pytorch-et$' || fail "convert ET"

refused() {  # refused PATTERN ARGS...: the command fails and says PATTERN
  local pattern="$1"; shift
  if "$deltactl" "$@" >/dev/null 2>"$tmp/err"; then fail "accepted: $*"; fi
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "refused without '$pattern': $*"; }
}
refused 'not a trace of any known kind (accepted: a DELTA trace' trace info "$traces/README.md"
refused 'not a trace of any known kind' plan "$traces/README.md"
printf '\x80\x04garbage' >"$tmp/broken.pickle"
refused 'not a readable pickle' trace info "$tmp/broken.pickle"
: >"$tmp/empty.json"
refused 'empty file, not a trace' trace info "$tmp/empty.json"
refused 'a Kineto profile on its own; give its Execution Trace' trace info "$kineto"
refused 'goes with an Execution Trace, and .* is a DTR op log' plan "$dtr" --kineto "$kineto"
refused 'goes with exactly one Execution Trace, and 0 were given' compare "$dtr" --kineto "$kineto" --budgets 0.7
# A gzipped DTR log reads as the log itself; one cut short is refused, not read in part.
gzip -c "$dtr" >"$tmp/dtr.log.gz"
[[ "$("$deltactl" trace info "$tmp/dtr.log.gz" | grep -E '^(blocks|ops):')" == "$("$deltactl" trace info "$dtr" | grep -E '^(blocks|ops):')" ]] ||
  fail "a gzipped DTR log reads otherwise than the log"
head -c 3000 "$tmp/dtr.log.gz" >"$tmp/cut.log.gz"
refused 'damaged gzip' trace info "$tmp/cut.log.gz"
# Budgets: one that rounds to 0 bytes would read as no budget; one past 2^63 bytes would wrap.
refused 'comes to 0 bytes' plan "$dtr" --budget 1e-12
refused 'too large' plan "$dtr" --budget 1e19
# A plan run on another GPU than it was made for: its figures would be that GPU's, not these.
"$deltactl" plan "$dtr" --budget "0.5 " "${quick[@]}" -o "$tmp/dtr-plan.json" >/dev/null 2>&1 || fail "plan with a budget in spaces"
refused 'was made for titanv' execute "$dtr" --plan "$tmp/dtr-plan.json" --gpu h200 --iterations 1
echo "all traces through one door"
