"""A self-contained HTML report of one trace: an inline SVG of live memory by category over
time, the per-iteration summary, the largest blocks and the swap candidates (longest idle gaps
between uses). No external resources; a few lines of inline JS add a hover read-out."""

import html
import json
import os

from analysis import (CATEGORIES, format_bytes, format_ns, iteration_summaries, largest_blocks,
                      memory_curve, swap_candidates)

COLORS = {"unknown": "#9e9e9e", "parameter": "#1f77b4", "input": "#8c564b", "activation": "#ff7f0e",
          "gradient": "#2ca02c", "optimizer_state": "#9467bd", "temporary": "#d62728"}
WIDTH, HEIGHT, MARGIN_LEFT, MARGIN_BOTTOM = 960, 320, 70, 30


def downsample(curve, points=1200):
    """Indices of at most `points` samples, keeping in each time bucket the sample with the most
    live bytes so that peaks survive."""
    n = len(curve.times)
    if n <= points:
        return list(range(n))
    t0, t1 = curve.times[0], curve.times[-1]
    span = max(1, t1 - t0)
    chosen = {}
    for i, t in enumerate(curve.times):
        bucket = min(points - 1, (t - t0) * points // span)
        if bucket not in chosen or curve.total[i] > curve.total[chosen[bucket]]:
            chosen[bucket] = i
    return sorted(set(chosen.values()) | {0, n - 1})


def _svg(curve, used):
    keep = downsample(curve)
    t0 = curve.times[keep[0]] if keep else 0
    t1 = curve.times[keep[-1]] if keep else 1
    peak = max(curve.total) if curve.total else 0
    plot_w, plot_h = WIDTH - MARGIN_LEFT - 10, HEIGHT - MARGIN_BOTTOM - 10

    def x(t):
        return MARGIN_LEFT + (t - t0) / max(1, t1 - t0) * plot_w

    def y(v):
        return 10 + plot_h - (v / peak * plot_h if peak else 0)

    parts = [f'<svg id="memory-chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="live memory by category">']
    below = [0] * len(keep)
    for name in used:
        above = [below[k] + curve.by_category[name][i] for k, i in enumerate(keep)]
        top, bottom = [], []
        for k, i in enumerate(keep):  # a step function: hold each value until the next change
            t_next = curve.times[keep[k + 1]] if k + 1 < len(keep) else curve.times[i]
            top += [f"{x(curve.times[i]):.1f},{y(above[k]):.1f}", f"{x(t_next):.1f},{y(above[k]):.1f}"]
            bottom += [f"{x(curve.times[i]):.1f},{y(below[k]):.1f}", f"{x(t_next):.1f},{y(below[k]):.1f}"]
        points = " ".join(top + bottom[::-1])
        parts.append(f'<polygon class="area" data-category="{name}" fill="{COLORS[name]}" '
                     f'fill-opacity="0.85" points="{points}"><title>{name}</title></polygon>')
        below = above
    for frac in (0, 0.25, 0.5, 0.75, 1):
        v = peak * frac
        parts.append(f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ccc" '
                     f'stroke-width="0.5"/><text x="{MARGIN_LEFT - 4}" y="{y(v) + 4:.1f}" font-size="10" '
                     f'text-anchor="end">{html.escape(format_bytes(v))}</text>')
    for frac, anchor in ((0, "start"), (0.5, "middle"), (1, "end")):
        t = t0 + (t1 - t0) * frac
        parts.append(f'<text x="{x(t):.1f}" y="{HEIGHT - 10}" font-size="10" text-anchor="{anchor}">'
                     f'{html.escape(format_ns(int(t - t0)))}</text>')
    parts.append(f'<line id="cursor" x1="0" x2="0" y1="10" y2="{10 + plot_h}" stroke="#000" stroke-width="0.5" '
                 f'visibility="hidden"/></svg>')
    samples = [[curve.times[i]] + [curve.by_category[name][i] for name in used] for i in keep]
    geometry = {"t0": t0, "t1": t1, "left": MARGIN_LEFT, "width": plot_w, "categories": used, "samples": samples}
    return "\n".join(parts), geometry


def _table(table_id, headers, rows):
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


_SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById('chart-data').textContent);
  function fmt(n) { var u = ['B','KiB','MiB','GiB','TiB'], i = 0;
    while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(2) : n.toFixed(0)) + ' ' + u[i]; }
  var chart = document.getElementById('memory-chart');
  var cursor = document.getElementById('cursor');
  var readout = document.getElementById('readout');
  var peak = 0, peakAt = 0;
  data.samples.forEach(function (s) { var total = 0;
    for (var c = 1; c < s.length; c++) total += s[c];
    if (total > peak) { peak = total; peakAt = s[0]; } });
  document.getElementById('peak').textContent = 'Peak ' + fmt(peak) + ' at ' +
      ((peakAt - data.t0) / 1e6).toFixed(3) + ' ms';
  chart.addEventListener('mousemove', function (event) {
    var box = chart.getBoundingClientRect();
    var fraction = (event.clientX - box.left - data.left) / data.width;
    if (fraction < 0 || fraction > 1) return;
    var t = data.t0 + fraction * (data.t1 - data.t0), sample = data.samples[0];
    for (var i = 0; i < data.samples.length && data.samples[i][0] <= t; i++) sample = data.samples[i];
    cursor.setAttribute('x1', event.clientX - box.left); cursor.setAttribute('x2', event.clientX - box.left);
    cursor.setAttribute('visibility', 'visible');
    readout.textContent = ((t - data.t0) / 1e6).toFixed(3) + ' ms: ' + data.categories.map(function (c, k) {
      return c + ' ' + fmt(sample[k + 1]); }).join(', ');
  });
  document.body.setAttribute('data-rendered', 'ok');
})();
"""

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
.legend span { display: inline-block; margin-right: 1em; font-size: 13px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }
#readout { font-family: monospace; font-size: 12px; min-height: 1.2em; }
"""


def render_html(trace, curve=None, top=20):
    curve = memory_curve(trace) if curve is None else curve
    used = [name for name in CATEGORIES if any(curve.by_category[name])]
    svg, geometry = _svg(curve, used) if curve.times else ("<p>No blocks in this trace.</p>", None)
    legend = "".join(f'<span><i style="background:{COLORS[n]}"></i>{n}</span>' for n in used)
    iterations = _table("iterations", ["iteration", "duration", "ops", "ops by phase", "peak live", "allocated",
                                       "durations"],
                        [(s.index, format_ns(s.end_ns - s.start_ns), s.ops,
                          ", ".join(f"{k} {v}" for k, v in sorted(s.ops_by_phase.items())),
                          format_bytes(s.peak_bytes), format_bytes(s.allocated_bytes),
                          "estimated" if s.estimated else "measured") for s in iteration_summaries(trace, curve)])
    blocks = _table("largest-blocks", ["block", "label", "category", "size", "longest idle gap", "gap starts"],
                    [(b.id, b.label, gap.category if gap else _category(b), format_bytes(b.size),
                      format_ns(gap.length_ns) if gap else "-", format_ns(gap.start_ns) if gap else "-")
                     for b, gap in largest_blocks(trace, top)])
    swaps = _table("swap-candidates", ["block", "label", "category", "size", "idle from", "idle to", "idle for"],
                   [(g.block, g.label, g.category, format_bytes(g.size), format_ns(g.start_ns), format_ns(g.end_ns),
                     format_ns(g.length_ns)) for g in swap_candidates(trace, top)])
    title = html.escape(f"DELTA trace: {trace.model or trace.source}")
    data = json.dumps(geometry or {"t0": 0, "t1": 1, "left": 0, "width": 1, "categories": [], "samples": [[0]]})
    data = data.replace("</", "<\\/")  # keep "</script>" in a label from ending the data block
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{_STYLE}</style></head>
<body>
<h1>{title}</h1>
<p>Source {html.escape(trace.source)}, GPU {html.escape(trace.gpu.name or trace.gpu.profile or 'unknown')},
{len(trace.blocks)} blocks, {len(trace.ops)} ops, {len(trace.iterations)} iterations.</p>
<h2>Live memory by category</h2>
<p id="peak"></p>
<div class="legend">{legend}</div>
{svg}
<div id="readout"></div>
<h2>Iterations</h2>
{iterations}
<h2>Largest blocks</h2>
{blocks}
<h2>Swap candidates (bytes &times; longest idle gap between uses)</h2>
{swaps}
<script type="application/json" id="chart-data">{data}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def _category(block):
    from analysis import category_name
    return category_name(block.category)


def write_html(trace, path, curve=None):
    text = render_html(trace, curve)
    temp = f"{path}.tmp.{os.getpid()}"
    with open(temp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temp, path)
    return len(text)
