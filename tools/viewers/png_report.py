"""A PNG of one trace's live memory by category over time (matplotlib, no display needed)."""

import os

from analysis import CATEGORIES, format_bytes, memory_curve
from html_report import COLORS, downsample


def write_png(trace, path, curve=None, title=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = memory_curve(trace) if curve is None else curve
    used = [name for name in CATEGORIES if any(curve.by_category[name])]
    keep = downsample(curve, 4000)
    t0 = curve.times[0] if curve.times else 0
    times_ms = [(curve.times[i] - t0) / 1e6 for i in keep]
    series = [[curve.by_category[name][i] / 2**30 for i in keep] for name in used]
    figure, axes = plt.subplots(figsize=(11, 4.5), dpi=110)
    if used:
        axes.stackplot(times_ms, series, labels=used, colors=[COLORS[n] for n in used], step="post", alpha=0.9)
        peak, at = curve.peak()
        axes.axvline((at - t0) / 1e6, color="black", linewidth=0.6, linestyle="--")
        axes.annotate(f"peak {format_bytes(peak)}", xy=((at - t0) / 1e6, peak / 2**30), fontsize=8,
                      xytext=(4, -12), textcoords="offset points")
        axes.legend(loc="upper left", fontsize=8)
    for it in trace.iterations[1:]:
        axes.axvline((it.start_ns - t0) / 1e6, color="grey", linewidth=0.5)
    axes.set_xlabel("time (ms)" + (", estimated" if any(op.duration_estimated for op in trace.ops) else ""))
    axes.set_ylabel("live memory (GiB)")
    axes.set_title(title or f"{trace.model or trace.source}: live memory by category")
    figure.tight_layout()
    temp = f"{path}.tmp.{os.getpid()}.png"
    figure.savefig(temp)
    plt.close(figure)
    os.replace(temp, path)
