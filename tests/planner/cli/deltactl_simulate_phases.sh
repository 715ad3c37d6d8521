#!/bin/sh
# deltactl simulate (and plan), time by phase: on a recorded trace (forward, backward and optimizer marked)
# the phases' times add up to the plan's step and their waits and replays to the plan's; the
# text names each phase; the timeline carries each op's phase. On a trace without phases none of
# it appears.
# Usage: deltactl_simulate_phases.sh DELTACTL TRACE PLAN DTR_LOG MLP_TRACE (PLAN may be gzip-compressed)
set -u
deltactl=$1 trace=$2 plan=$3 log=$4 mlp=$5
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

"$deltactl" simulate "$trace" "$plan" --json > "$dir/sim.json" || fail "simulate --json"
"$deltactl" simulate "$trace" "$plan" --timeline "$dir/timeline.json" > "$dir/sim.txt" || fail "simulate"
cat "$dir/sim.txt"
python3 - "$dir/sim.json" "$dir/timeline.json" "$dir/sim.txt" <<'PY' || fail "time by phase"
import json, re, sys
sim = json.load(open(sys.argv[1]))
timeline = json.load(open(sys.argv[2]))
text = open(sys.argv[3]).read()
phases = sim["phases"]
names = [p["phase"] for p in phases]
assert names == ["forward", "backward", "optimizer"], names
ops = timeline["ops"]
# Each op's phase, in the timeline, matches the phases' op ranges and counts.
assert len(ops["phase"]) == len(ops["name"])
for p in phases:
    assert ops["phase"][p["first_op"]] == p["phase"] and ops["phase"][p["last_op"]] == p["phase"], p
    assert sum(1 for x in ops["phase"] if x == p["phase"]) == p["ops"], p
# The phases and the wait after the last op make up the step; their waits and replays the plan's.
assert sum(p["step_ns"] for p in phases) + sim["end_wait_ns"] == sim["step_time_ns"], (phases, sim["step_time_ns"])
assert sum(p["stall_ns"] for p in phases) == sum(ops["stall_ns"])
assert sum(p["replay_ns"] for p in phases) == sum(ops["replay_ns"]) == sim["extra_compute_ns"]
assert any(p["stall_ns"] + p["replay_ns"] > 0 for p in phases), "a plan under half the peak that adds nothing"
for p in phases:
    assert p["step_ns"] >= p["native_ns"] + p["stall_ns"] + p["replay_ns"] > 0, p
line = next(l for l in text.splitlines() if "by phase" in l)
for p in phases:
    m = re.search(p["phase"] + r" ([0-9.]+) against ([0-9.]+)", line)
    assert m and abs(float(m.group(1)) - p["step_ns"] / 1e6) < 0.006, (line, p)
print("phases:", [(p["phase"], p["step_ns"], p["native_ns"]) for p in phases])
PY

# A DTR log's phases (its loader marks the forward and backward passes) add up alike.
"$deltactl" plan "$log" --budget 0.5 -o "$dir/dtr.json" > "$dir/plan.txt" 2>/dev/null || fail "plan the log"
grep -q "by phase, ms in the plan's step against the ops' own: forward .*; backward" "$dir/plan.txt" || fail "plan: no time by phase"
"$deltactl" simulate "$log" "$dir/dtr.json" --json > "$dir/dtr-sim.json" || fail "simulate the log"
python3 - "$dir/dtr-sim.json" <<'PY' || fail "the log's phases"
import json, sys
sim = json.load(open(sys.argv[1]))
assert [p["phase"] for p in sim["phases"]] == ["forward", "backward"], sim["phases"]
assert sum(p["step_ns"] for p in sim["phases"]) + sim["end_wait_ns"] == sim["step_time_ns"]
PY

# A trace without phases (the recorded MLP with its marks taken out): no line, no key.
python3 - "$mlp" "$dir/mlp.json.gz" <<'PY' || fail "strip the phases"
import gzip, json, sys
t = json.load(gzip.open(sys.argv[1]))
column = t["op_columns"].index("phase")
for op in t["ops"]:
    op[column] = 0
json.dump(t, gzip.open(sys.argv[2], "wt"))
PY
"$deltactl" plan "$dir/mlp.json.gz" --budget 0.97 --live-only -o "$dir/mlp-plan.json" > "$dir/mlp-plan.txt" 2>/dev/null || fail "plan the MLP"
grep -q "by phase" "$dir/mlp-plan.txt" && fail "plan: by phase on a trace without phases"
out=$("$deltactl" simulate "$dir/mlp.json.gz" "$dir/mlp-plan.json" --live-only) || fail "simulate the MLP"
echo "$out"
echo "$out" | grep -q "by phase" && fail "by phase on a trace without phases"
"$deltactl" simulate "$dir/mlp.json.gz" "$dir/mlp-plan.json" --live-only --json | grep -q '"phases"' &&
  fail "phases in the JSON of a trace without phases"
exit 0
