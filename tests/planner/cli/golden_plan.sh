#!/bin/sh
# One golden-plan case: plans TRACE at BUDGET with `deltactl plan`'s defaults but in the model
# the golden plans were made in and the planners are compared in (docs/planner.md): discards
# freed at once (--drop-discards) and device time alone (--device-time-only). It compares the
# plan file, byte for byte, with the one stored under STORED (a path without its extension):
# STORED.json.gz holds the plan, or STORED.refused.txt the error line of a budget that gets
# none. With DELTA_REFRESH_PLANS=1 it writes them instead (scripts/refresh-plans does that for
# every case).
# Usage: golden_plan.sh DELTACTL TRACE BUDGET STORED
set -u
deltactl=$1 trace=$2 budget=$3 stored=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$deltactl" plan "$trace" --budget "$budget" --drop-discards --device-time-only -o "$dir/plan.json" >"$dir/out" 2>"$dir/err"
status=$?
if [ $status -eq 0 ]; then
  got="$dir/plan.json" want="$stored.json.gz" other="$stored.refused.txt"
else
  # No plan: what counts is the reason, the simulator's first offending op.
  grep '^deltactl: error: ' "$dir/err" >"$dir/refused.txt"
  if [ ! -s "$dir/refused.txt" ]; then
    cat "$dir/err"
    echo "FAILED: deltactl plan exited $status without an error line"
    exit 1
  fi
  got="$dir/refused.txt" want="$stored.refused.txt" other="$stored.json.gz"
fi

if [ "${DELTA_REFRESH_PLANS:-}" = 1 ]; then
  mkdir -p "$(dirname "$stored")"
  rm -f "$other"
  case $want in
    *.gz) gzip -n -9 -c "$got" >"$want" ;;  # -n: no name or time inside, so the bytes are the plan's
    *) cp "$got" "$want" ;;
  esac
  echo "wrote $want"
  exit 0
fi

if [ ! -e "$want" ]; then
  if [ -e "$other" ]; then
    echo "FAILED: stored $(basename "$other"), got $(basename "$want"):"
    cat "$dir/refused.txt" 2>/dev/null || grep -o '"overhead": *[0-9.e-]*' "$got"
  else
    echo "FAILED: nothing stored as $want"
  fi
  echo "(an intended change of plans: scripts/refresh-plans, and say so in the commit)"
  exit 1
fi
case $want in
  *.gz) gzip -dc "$want" >"$dir/want" ;;
  *) cp "$want" "$dir/want" ;;
esac
if cmp -s "$dir/want" "$got"; then
  echo "same plan as $want"
  exit 0
fi
echo "FAILED: the plan differs from $want (first lines that differ, stored then new):"
diff "$dir/want" "$got" | head -n 20
echo "(an intended change of plans: scripts/refresh-plans, and say so in the commit)"
exit 1
