"""Overhead-versus-budget frontier of `deltactl compare` results.

Input: JSON lines as `deltactl compare --json` prints them (trace, method, budget_ratio,
feasible, overhead, peak_bytes), and optionally, with --bound, those of `deltactl bound --json`
(trace, budget_ratio, reachable, overhead_lower_bound): the lowest overhead any plan could
reach, shaded in grey where no plan can be, and a column of the tables. Output: a PNG (one
panel per trace, one line per method; infeasible points are left out) and/or an HTML page with
the plot and a table per trace. The PNG needs matplotlib; the HTML table does not.
"""

import argparse
import base64
import html
import io
import json
import sys
from collections import defaultdict


def read_json_lines(path, fields, expected):
    """The objects of a JSON-lines file, each checked for `fields`; exits naming the line."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not JSON ({e.msg})")
            for field in fields:
                if field not in row:
                    sys.exit(f"{path}:{number}: missing field {field}{expected}")
            yield row


def read_rows(path):
    rows = list(read_json_lines(path, ("trace", "method", "budget_ratio", "feasible"), ""))
    if not rows:
        sys.exit(f"{path}: no results to plot")
    return rows


def read_bounds(path):
    bounds = defaultdict(dict)  # trace -> budget_ratio -> bound row
    for row in read_json_lines(path, ("trace", "budget_ratio", "reachable", "overhead_lower_bound"),
                               " (expected `deltactl bound --json` output)"):
        bounds[row["trace"]][row["budget_ratio"]] = row
    return bounds


def bound_cell(row):
    if row is None:
        return ""
    if row["reachable"] is False:
        return "unreachable"
    if row["overhead_lower_bound"] is None:
        return "n/a"
    return f"&ge; {row['overhead_lower_bound']:.3f}"


def by_trace(rows):
    traces = defaultdict(list)
    for row in rows:
        traces[row["trace"]].append(row)
    return traces


def render_png(rows, bounds):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("the PNG needs matplotlib (scripts/setup-python installs it into the venv)")
    traces = by_trace(rows)
    # One colour per method in every panel, so a method reads the same everywhere.
    palette = plt.get_cmap("tab10").colors
    colours = {m: palette[k % len(palette)] for k, m in enumerate(sorted({r["method"] for r in rows}))}
    columns = min(3, len(traces))
    lines = (len(traces) + columns - 1) // columns
    figure, axes = plt.subplots(lines, columns, figsize=(5 * columns, 3.8 * lines), squeeze=False)
    for panel, (trace, trace_rows) in enumerate(sorted(traces.items())):
        ax = axes[panel // columns][panel % columns]
        methods = defaultdict(list)
        for row in trace_rows:
            if row["feasible"] and row.get("overhead") is not None:
                methods[row["method"]].append((row["budget_ratio"], row["overhead"]))
        for method, points in sorted(methods.items()):
            points.sort()
            style = "-o" if method == "delta" else "--."
            ax.plot([p[0] for p in points], [p[1] for p in points], style, label=method,
                    color=colours[method], linewidth=2.2 if method == "delta" else 1.0)
        known = sorted((ratio, row["overhead_lower_bound"]) for ratio, row in bounds.get(trace, {}).items()
                       if row["overhead_lower_bound"] is not None)
        if known:
            xs, ys = [p[0] for p in known], [p[1] for p in known]
            ax.fill_between(xs, 1.0, ys, color="0.85", zorder=0, label="no plan (lower bound)")
            ax.plot(xs, ys, ":", color="0.3", linewidth=1.0)
        ax.set_title(trace.split("-")[0])
        ax.set_xlabel("memory budget / native peak")
        ax.set_ylabel("step time / native")
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for panel in range(len(traces), lines * columns):
        axes[panel // columns][panel % columns].axis("off")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def render_html(rows, png, bounds):
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>DELTA: planners compared</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#eee}"
             ".bad{color:#b00}.best{font-weight:bold}</style></head><body>",
             "<h1>Step-time overhead under a memory budget</h1>",
             "<p>Overhead = simulated step time / native step time; budgets are fractions of the native peak.</p>"]
    if png:
        parts.append("<img alt='frontier' src='data:image/png;base64," + base64.b64encode(png).decode() + "'>")
    for trace, trace_rows in sorted(by_trace(rows).items()):
        methods = sorted({r["method"] for r in trace_rows})
        budgets = sorted({r["budget_ratio"] for r in trace_rows}, reverse=True)
        cell = {(r["budget_ratio"], r["method"]): r for r in trace_rows}
        parts.append(f"<h2>{html.escape(trace)}</h2><table><tr><th>budget</th>")
        parts.extend(f"<th>{html.escape(m)}</th>" for m in methods)
        trace_bounds = bounds.get(trace, {})
        if trace_bounds:
            parts.append("<th>lower bound</th>")
        parts.append("</tr>")
        for budget in budgets:
            feasible = [cell[(budget, m)]["overhead"] for m in methods
                        if (budget, m) in cell and cell[(budget, m)]["feasible"]]
            best = min(feasible) if feasible else None
            parts.append(f"<tr><th>{budget:.2f}</th>")
            for m in methods:
                row = cell.get((budget, m))
                if row is None:
                    parts.append("<td></td>")
                elif row["feasible"]:
                    mark = " class='best'" if row["overhead"] == best else ""
                    parts.append(f"<td{mark}>{row['overhead']:.3f}</td>")
                else:
                    parts.append(f"<td class='bad' title='{html.escape(row.get('reason') or '')}'>infeasible</td>")
            if trace_bounds:
                parts.append(f"<td>{bound_cell(trace_bounds.get(budget))}</td>")
            parts.append("</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="JSON lines from `deltactl compare --json`")
    parser.add_argument("--png", help="write the frontier plot here")
    parser.add_argument("--html", help="write an HTML page here")
    parser.add_argument("--bound", help="JSON lines from `deltactl bound --json` for the same traces")
    args = parser.parse_args()
    if not args.png and not args.html:
        sys.exit("nothing to do: give --png and/or --html")
    rows = read_rows(args.results)
    bounds = read_bounds(args.bound) if args.bound else {}
    png = render_png(rows, bounds) if args.png else None
    if args.png:
        with open(args.png, "wb") as f:
            f.write(png)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html(rows, png, bounds))


if __name__ == "__main__":
    main()
