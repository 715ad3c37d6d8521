"""A plan as it ran, beside the plan as the simulator predicted it, op by op.

Input: the JSON that `deltactl execute --timeline` writes (format "delta-execute-timeline"): the
simulator's timeline of the plan (as `deltactl simulate --timeline` writes it), and the last
iteration executed on the sim device under the plan and in cache mode (each op's kernel start
and end, DELTA's reserved bytes once the op was issued, the copies on the executor's lanes and
the replayed kernels). Output: an HTML page with the figures and a drawing of three panels, each
on its own step's time axis:

- Memory: reserved bytes executed against planned, and the budget.
- Drift: how far each op starts after the plan said it would (executed minus planned), and
  after cache mode, so the ops where the executor falls behind its model show.
- Copy lanes: planned and executed copies to host and back, four lanes.
"""

import argparse
import base64
import html
import io
import json
import os
import sys

GIB = float(1 << 30)


def fail(message):
    sys.exit(f"execute_timeline: {message}")


def read(path):
    """The timeline, checked for what the drawing needs; exits naming what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{path}: cannot read an execute timeline ({e})")
    if not isinstance(doc, dict) or doc.get("format") != "delta-execute-timeline":
        fail(f"{path}: not an execute timeline (expected `deltactl execute --timeline` output)")
    for part, keys in (("planned", ("ops", "copies", "budget_bytes", "step_ns")),
                       ("executed", ("ops", "copies", "replays", "step_ns")), ("cache", ("ops", "step_ns"))):
        if not isinstance(doc.get(part), dict) or any(k not in doc[part] for k in keys):
            fail(f"{path}: '{part}' lacks one of {', '.join(keys)}")
    ops = doc["executed"]["ops"]
    if len({len(ops[k]) for k in ("op", "start_ns", "end_ns", "reserved_bytes")}) != 1:
        fail(f"{path}: the executed op columns differ in length")
    return doc


def spans(copies, to_host):
    return [(s / 1e6, (e - s) / 1e6) for d, s, e in zip(copies["to_host"], copies["start_ns"], copies["end_ns"])
            if bool(d) == to_host]


def drift_ms(doc, against):
    """Per executed op: its start minus the start `against` gives the same op (ms)."""
    executed = doc["executed"]["ops"]
    if against == "planned":
        starts = dict(enumerate(doc["planned"]["ops"]["start_ns"]))
    else:
        starts = dict(zip(doc["cache"]["ops"]["op"], doc["cache"]["ops"]["start_ns"]))
    return [(op, (start - starts[op]) / 1e6) for op, start in zip(executed["op"], executed["start_ns"]) if op in starts]


def render_png(doc):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("the drawing needs matplotlib (scripts/setup-python installs it into the venv)")
    planned, executed = doc["planned"], doc["executed"]
    figure, (memory, drift, lanes) = plt.subplots(3, 1, figsize=(11, 8.5), gridspec_kw={"height_ratios": [3, 2, 1.2]})
    p_ops, e_ops = planned["ops"], executed["ops"]
    if isinstance(p_ops.get("reserved_bytes"), list):
        memory.step([s / 1e6 for s in p_ops["start_ns"]], [b / GIB for b in p_ops["reserved_bytes"]], where="post",
                    color="tab:blue", linewidth=1.2, label="planned: reserved (simulator)")
    memory.step([s / 1e6 for s in e_ops["start_ns"]], [b / GIB for b in e_ops["reserved_bytes"]], where="post",
                color="tab:green", linewidth=1.2, label="executed: reserved by DELTA")
    memory.axhline(planned["budget_bytes"] / GIB, color="tab:red", linestyle="--", linewidth=1.0, label="budget")
    memory.set_ylabel("GiB")
    memory.set_xlabel("time in the step (ms), each on its own clock")
    memory.grid(alpha=0.3)
    memory.legend(fontsize=8, loc="upper right")
    memory.set_title(f"{planned.get('trace', '')} on {planned.get('gpu', '?')}: executed step "
                     f"{executed['step_ns'] / 1e6:.1f} ms, planned {planned['step_ns'] / 1e6:.1f} ms, cache mode "
                     f"{doc['cache']['step_ns'] / 1e6:.1f} ms", fontsize=10)
    for against, color in (("planned", "tab:purple"), ("cache", "0.5")):
        rows = drift_ms(doc, against)
        drift.plot([op for op, _ in rows], [ms for _, ms in rows], color=color, linewidth=1.0,
                   label=f"executed start minus {against} start")
    drift.axhline(0, color="black", linewidth=0.5)
    drift.set_xlabel("op of the step")
    drift.set_ylabel("ms")
    drift.grid(alpha=0.3)
    drift.legend(fontsize=8, loc="upper left")
    lane_rows = ((planned["copies"], True, "planned D2H", "tab:brown"), (executed["copies"], True, "executed D2H", "tab:orange"),
                 (planned["copies"], False, "planned H2D", "tab:olive"), (executed["copies"], False, "executed H2D", "tab:cyan"))
    for row, (copies, to_host, label, color) in enumerate(lane_rows):
        lanes.broken_barh(spans(copies, to_host), (row + 0.15, 0.7), facecolors=color, edgecolors="white", linewidth=0.3)
    lanes.set_ylim(0, len(lane_rows))
    lanes.set_yticks([r + 0.5 for r in range(len(lane_rows))], [r[2] for r in lane_rows], fontsize=7)
    lanes.set_xlabel("time in the step (ms)")
    lanes.grid(alpha=0.3, axis="x")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def render_html(doc, png):
    planned, executed, cache = doc["planned"], doc["executed"], doc["cache"]
    worst = max(drift_ms(doc, "planned"), key=lambda row: row[1], default=None)
    names = planned["ops"].get("name", [])
    p_copies, e_copies = planned["copies"], executed["copies"]
    rows = [("trace", planned.get("trace", "")), ("GPU profile", planned.get("gpu", "")),
            ("budget", f"{planned['budget_bytes'] / GIB:.3f} GiB"),
            ("reserved peak", f"executed {executed.get('reserved_peak_bytes', 0) / GIB:.3f} GiB"),
            ("step", f"executed {executed['step_ns'] / 1e6:.2f} ms, planned {planned['step_ns'] / 1e6:.2f} ms "
                     f"({executed['step_ns'] / planned['step_ns']:.4f}x the plan), cache mode {cache['step_ns'] / 1e6:.2f} ms"
             if planned["step_ns"] else "no planned step"),
            ("copies", f"planned {len(p_copies['start_ns'])}, executed {len(e_copies['start_ns'])}"),
            ("replayed kernels", f"executed {len(executed['replays']['start_ns'])}")]
    if worst:
        name = names[worst[0]] if worst[0] < len(names) else "?"
        rows.append(("most behind the plan", f"op {worst[0]} ({name[:80]}): {worst[1]:.2f} ms"))
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>DELTA: a plan as it ran</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#eee}</style></head><body>",
             "<h1>A plan as it ran, beside the plan</h1><table id='figures'>"]
    parts.extend(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    parts.append("</table>")
    if png:
        parts.append("<img alt='executed and planned memory, drift and copy lanes' src='data:image/png;base64,"
                     + base64.b64encode(png).decode() + "'>")
    parts.append("</body></html>")
    return "".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", help="JSON from `deltactl execute --timeline`")
    parser.add_argument("--png", help="write the drawing here")
    parser.add_argument("--html", help="write an HTML page here")
    args = parser.parse_args()
    if not args.png and not args.html:
        fail("nothing to do: give --png and/or --html")
    doc = read(args.timeline)
    png = render_png(doc)
    for path, data in ((args.png, png), (args.html, render_html(doc, png).encode("utf-8") if args.html else None)):
        if path:
            partial = path + ".partial"
            with open(partial, "wb") as f:
                f.write(data)
            os.replace(partial, path)


if __name__ == "__main__":
    main()
