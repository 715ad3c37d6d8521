"""Where a plan keeps memory under its budget and where it loses time, op by op.

Input: the JSON that `deltactl simulate --timeline` writes (format "delta-plan-timeline"):
per op, the trace's own schedule (start, live bytes) beside the plan's (start, end, bytes held
while it runs, most held since the previous op, replays and stalls just before it, and through
the caching allocator what it reserves). Output: a PNG with two panels on the plan's time axis,
and/or an HTML page with the PNG and the plan's figures.

- Memory: bytes the plan holds against the budget, and the trace's live bytes on its own
  (shorter) time axis, so the excess the plan removes is visible.
- Copy lanes (when the timeline lists copies): each copy to host and back as a bar on its
  lane, so a lane booked solid before the peak, or idle where a swap could travel, shows.
- Delay: how far the plan runs behind the trace, split into replayed compute and stalls
  (waiting for a prefetch or for an eviction to free memory), accumulated over the step.
- Phases (when the timeline names them: forward, backward, optimizer): shaded on every panel
  and named, with the time each added, in the delay panel; the HTML page tabulates them.
"""

import argparse
import base64
import html
import io
import json
import os
import sys

GIB = float(1 << 30)
FIELDS = ("name", "native_start_ns", "native_live_bytes", "start_ns", "end_ns", "held_bytes", "peak_bytes", "replay_ns",
          "stall_ns")


def read_timeline(path):
    """The timeline object, checked for what the drawing needs; exits naming what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            timeline = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"{path}: cannot read a timeline ({e})")
    if not isinstance(timeline, dict) or timeline.get("format") != "delta-plan-timeline":
        sys.exit(f"{path}: not a plan timeline (expected `deltactl simulate --timeline` output)")
    ops = timeline.get("ops")
    if not isinstance(ops, dict) or any(not isinstance(ops.get(k), list) for k in FIELDS):
        sys.exit(f"{path}: the timeline's ops lack one of the columns {', '.join(FIELDS)}")
    lengths = {len(ops[k]) for k in FIELDS}
    if len(lengths) != 1:
        sys.exit(f"{path}: the timeline's columns differ in length")
    for key in ("budget_bytes", "native_step_ns", "step_ns", "feasible"):
        if key not in timeline:
            sys.exit(f"{path}: missing field {key}")
    return timeline


COPY_FIELDS = ("to_host", "start_ns", "end_ns", "block", "bytes")


def copies_of(timeline):
    """The copies as (to_host, start_ns, end_ns) rows, or [] when the timeline has none (older
    files); exits naming what is wrong when they are malformed."""
    copies = timeline.get("copies")
    if copies is None:
        return []
    if not isinstance(copies, dict) or any(not isinstance(copies.get(k), list) for k in COPY_FIELDS):
        sys.exit(f"the timeline's copies lack one of the columns {', '.join(COPY_FIELDS)}")
    if len({len(copies[k]) for k in COPY_FIELDS}) != 1:
        sys.exit("the timeline's copy columns differ in length")
    return list(zip(copies["to_host"], copies["start_ns"], copies["end_ns"]))


def lane_busy_ms(copies, to_host):
    """Milliseconds a lane is busy: the union of its copies' spans."""
    spans = sorted((start, end) for direction, start, end in copies if bool(direction) == to_host)
    total, reach = 0, None
    for start, end in spans:
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1e6


def cumulative(values):
    total, out = 0, []
    for v in values:
        total += v
        out.append(total)
    return out


def phase_runs(timeline):
    """Runs of ops in one phase, in step order: (phase, first op, last op). None where the
    timeline names no phase (an older file, or a trace without phases)."""
    phases = timeline["ops"].get("phase")
    if not isinstance(phases, list) or not any(p not in ("unknown", None) for p in phases):
        return []
    runs = []
    for i, phase in enumerate(phases):
        if runs and runs[-1][0] == phase:
            runs[-1][2] = i
        else:
            runs.append([phase, i, i])
    return [tuple(run) for run in runs]


def time_by_phase(timeline):
    """Per phase, in the order each first appears: (phase, ms in the plan's step, replays ms,
    waits ms), each op's time from the op before's end to its own."""
    ops = timeline["ops"]
    totals, order, before = {}, [], 0
    for i, phase in enumerate(ops.get("phase") or []):
        if phase not in totals:
            totals[phase] = [0.0, 0.0, 0.0]
            order.append(phase)
        totals[phase][0] += (ops["end_ns"][i] - before) / 1e6
        totals[phase][1] += ops["replay_ns"][i] / 1e6
        totals[phase][2] += ops["stall_ns"][i] / 1e6
        before = ops["end_ns"][i]
    return [(phase, *totals[phase]) for phase in order] if phase_runs(timeline) else []


def replay_by_op_name(timeline, count=8):
    """Replayed compute (ms) before each op, summed by the name of the op it runs before."""
    ops = timeline["ops"]
    totals = {}
    for name, replay in zip(ops["name"], ops["replay_ns"]):
        if replay > 0:
            totals[name] = totals.get(name, 0) + replay / 1e6
    return sorted(totals.items(), key=lambda kv: -kv[1])[:count]


def render_png(timeline):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("the PNG needs matplotlib (scripts/setup-python installs it into the venv)")
    ops = timeline["ops"]
    ms = lambda values: [v / 1e6 for v in values]
    copies = copies_of(timeline)
    if copies:
        figure, (memory, lanes, delay) = plt.subplots(3, 1, figsize=(11, 7.5), sharex=True,
                                                      gridspec_kw={"height_ratios": [3, 0.8, 2]})
    else:
        figure, (memory, delay) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True,
                                               gridspec_kw={"height_ratios": [3, 2]})
    start = ms(ops["start_ns"])
    memory.step(ms(ops["native_start_ns"]), [b / GIB for b in ops["native_live_bytes"]], where="post",
                color="0.6", linewidth=1.0, label="trace, no budget (its own time)")
    # The most held between two ops (replays and their inputs included) drawn at the op it
    # precedes: a replay's burst is where a tight plan meets its budget.
    memory.step(start, [b / GIB for b in ops["peak_bytes"]], where="pre", color="tab:cyan", linewidth=0.8,
                label="most held before the op (replays)")
    memory.step(start, [b / GIB for b in ops["held_bytes"]], where="post", color="tab:blue", linewidth=1.4,
                label=f"{timeline.get('method', 'plan')}: bytes held")
    if isinstance(ops.get("reserved_bytes"), list) and len(ops["reserved_bytes"]) == len(start):
        memory.step(start, [b / GIB for b in ops["reserved_bytes"]], where="post", color="tab:green", linewidth=1.0,
                    label="reserved by the caching allocator")
    budget = timeline["budget_bytes"]
    if budget:
        memory.axhline(budget / GIB, color="tab:red", linestyle="--", linewidth=1.0, label="budget")
    if not timeline["feasible"] and start:
        memory.axvline(start[-1], color="tab:red", linewidth=2.0, alpha=0.5, label="plan fails here")
    memory.set_ylabel("GiB")
    memory.grid(alpha=0.3)
    memory.legend(fontsize=8, loc="upper right")
    title = timeline.get("model") or timeline.get("trace", "")
    overhead = timeline["step_ns"] / timeline["native_step_ns"] if timeline["native_step_ns"] else 1.0
    memory.set_title(f"{title} on {timeline.get('gpu', '?')}: "
                     + (f"step {timeline['step_ns'] / 1e6:.1f} ms, {overhead:.3f}x native" if timeline["feasible"]
                        else "infeasible: " + timeline.get("error", "")[:90]), fontsize=10)
    if copies:
        for row, (to_host, color, label) in enumerate(((True, "tab:brown", "to host"), (False, "tab:olive", "to device"))):
            bars = [(start / 1e6, (end - start) / 1e6) for direction, start, end in copies if bool(direction) == to_host]
            lanes.broken_barh(bars, (row + 0.15, 0.7), facecolors=color, edgecolors="white", linewidth=0.3)
            lanes.text(0.995, (row + 0.5) / 2, f"{label}: {len(bars)} copies, busy {lane_busy_ms(copies, to_host):.1f} ms",
                       transform=lanes.transAxes, ha="right", va="center", fontsize=7)
        lanes.set_ylim(0, 2)
        lanes.set_yticks([0.5, 1.5], ["D2H", "H2D"])
        lanes.set_ylabel("copy lanes")
        lanes.grid(alpha=0.3, axis="x")
    shades = {"forward": "tab:blue", "backward": "tab:green", "optimizer": "tab:red"}
    for phase, first, last in phase_runs(timeline):
        if phase not in shades:
            continue
        for panel in (memory, lanes, delay) if copies else (memory, delay):
            panel.axvspan(start[first], ops["end_ns"][last] / 1e6, color=shades[phase], alpha=0.06, linewidth=0)
        added = sum(ops["replay_ns"][first:last + 1]) + sum(ops["stall_ns"][first:last + 1])
        delay.text((start[first] + ops["end_ns"][last] / 1e6) / 2, 1.01, f"{phase} +{added / 1e6:.1f} ms",
                   transform=delay.get_xaxis_transform(), ha="center", va="bottom", fontsize=7, color="0.3")
    replayed, stalled = ms(cumulative(ops["replay_ns"])), ms(cumulative(ops["stall_ns"]))
    delay.fill_between(start, 0, replayed, step="post", color="tab:orange", alpha=0.7, label="replayed compute")
    delay.fill_between(start, replayed, [r + s for r, s in zip(replayed, stalled)], step="post", color="tab:purple",
                       alpha=0.6, label="stalls (copies, memory)")
    delay.set_ylabel("ms behind the trace")
    delay.set_xlabel("time in the plan's step (ms)")
    delay.grid(alpha=0.3)
    delay.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def render_html(timeline, png):
    ops = timeline["ops"]
    native, step = timeline["native_step_ns"], timeline["step_ns"]
    held = max(ops["peak_bytes"], default=0)
    rows = [("trace", timeline.get("trace", "")), ("method", timeline.get("method", "")),
            ("GPU profile", timeline.get("gpu", "")),
            ("budget", f"{timeline['budget_bytes'] / GIB:.2f} GiB"
                       + (" (through the caching allocator)" if timeline.get("through_allocator") else " (live bytes)")),
            ("native peak", f"{timeline.get('native_peak_bytes', 0) / GIB:.2f} GiB"),
            ("most bytes held", f"{held / GIB:.2f} GiB"),
            ("step", f"{step / 1e6:.2f} ms against {native / 1e6:.2f} ms native"
                     + (f" ({step / native:.4f}x)" if native else "")),
            ("replayed compute", f"{sum(ops['replay_ns']) / 1e6:.2f} ms"),
            ("stalls", f"{sum(ops['stall_ns']) / 1e6:.2f} ms")]
    copies = copies_of(timeline)
    if copies:
        rows.append(("copy lanes", f"to host {sum(1 for c in copies if c[0])} copies, busy {lane_busy_ms(copies, True):.2f} ms; "
                                   f"to device {sum(1 for c in copies if not c[0])} copies, busy {lane_busy_ms(copies, False):.2f} ms"))
    if not timeline["feasible"]:
        rows.append(("infeasible", timeline.get("error", "")))
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>DELTA: plan timeline</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#eee}</style></head><body>",
             "<h1>Plan timeline</h1><table id='figures'>"]
    parts.extend(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    parts.append("</table>")
    if png:
        parts.append("<img alt='memory and delay over the step' src='data:image/png;base64,"
                     + base64.b64encode(png).decode() + "'>")
    phases = time_by_phase(timeline)
    if phases:
        parts.append("<h2>By phase</h2><table id='phases'><tr><th>phase</th><th>ms in the step</th><th>replays, ms</th>"
                     "<th>waits, ms</th></tr>")
        parts.extend(f"<tr><td>{html.escape(str(phase))}</td><td>{step:.2f}</td><td>{replay:.2f}</td><td>{wait:.2f}</td></tr>"
                     for phase, step, replay, wait in phases)
        parts.append("</table>")
    replays = replay_by_op_name(timeline)
    if replays:
        parts.append("<h2>Replays, by the op they run before</h2><table id='replays'><tr><th>op</th><th>ms</th></tr>")
        parts.extend(f"<tr><td>{html.escape(name)}</td><td>{value:.2f}</td></tr>" for name, value in replays)
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


def write_atomically(path, data):
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(data)
    os.replace(partial, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", help="JSON from `deltactl simulate --timeline`")
    parser.add_argument("--png", help="write the drawing here")
    parser.add_argument("--html", help="write an HTML page here")
    args = parser.parse_args()
    if not args.png and not args.html:
        sys.exit("nothing to do: give --png and/or --html")
    timeline = read_timeline(args.timeline)
    png = render_png(timeline)
    if args.png:
        write_atomically(args.png, png)
    if args.html:
        write_atomically(args.html, render_html(timeline, png).encode("utf-8"))


if __name__ == "__main__":
    main()
