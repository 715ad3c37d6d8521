"""Draws docs/img/architecture.png: DELTA as data flows through it, each part with its folder.

    python3 tools/plots/architecture.py [-o docs/img/architecture.png]

Needs matplotlib (the project's venv has it: scripts/setup-python).
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

LIVE = "#dbe8f6"     # in the training job (libdelta.so)
OFFLINE = "#e4f2dc"  # offline (deltactl)
DATA = "#fbf0d2"     # files
BASE = "#ececec"     # under everything
EDGE = "#3b4a5a"


def box(ax, x, y, w, h, title, folder, colour, lines=()):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=colour, edgecolor=EDGE, linewidth=1.2))
    top = y + h - 0.28
    ax.text(x + w / 2, top, title, ha="center", va="center", fontsize=11.5, weight="bold", color="#1d2733")
    ax.text(x + w / 2, top - 0.32, folder, ha="center", va="center", fontsize=9.5, family="monospace", color="#2b5c8a")
    for k, line in enumerate(lines):
        ax.text(x + w / 2, top - 0.68 - 0.27 * k, line, ha="center", va="center", fontsize=8.3, color="#333333")


def arrow(ax, start, end, label="", curve=0.0, offset=(0, 0.16), colour=EDGE):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, linewidth=1.4, color=colour,
                                 connectionstyle=f"arc3,rad={curve}", shrinkA=2, shrinkB=2))
    if label:
        ax.text((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], label, ha="center",
                va="center", fontsize=8.3, style="italic", color="#444444")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("-o", "--output", default=os.path.join(root, "docs", "img", "architecture.png"))
    args = parser.parse_args()

    fig, ax = plt.subplots(figsize=(13, 7.8))
    ax.set_xlim(0, 13)
    ax.set_ylim(0, 7.8)
    ax.axis("off")

    # The training job, with libdelta.so loaded into it.
    ax.add_patch(FancyBboxPatch((0.15, 3.45), 12.7, 3.85, boxstyle="round,pad=0.02,rounding_size=0.2",
                                facecolor="none", edgecolor="#8aa6c4", linewidth=1, linestyle="--"))
    ax.text(0.3, 7.55, "in the training job: libdelta.so (src/: C ABI, LD_PRELOAD shims, runtime, record mode)",
            fontsize=9.5, color="#4f6f91", va="center")
    box(ax, 0.45, 5.1, 2.3, 1.75, "program", "PyTorch job", LIVE, ["allocates and frees", "tensors, runs kernels"])
    box(ax, 3.55, 5.1, 2.55, 1.75, "allocator", "allocator/", LIVE, ["caching allocator:", "serves every malloc/free"])
    box(ax, 6.9, 5.1, 2.45, 1.75, "recorder", "profiler/", LIVE, ["which kernel touches", "which block, and when"])
    box(ax, 0.45, 3.6, 2.3, 1.3, "executor", "executor/", LIVE, ["runs a plan (being written)"])
    box(ax, 3.55, 3.6, 2.55, 1.3, "device layer", "device/", BASE, ["cuda/ (dlopen'ed driver), sim/"])
    box(ax, 10.1, 5.1, 2.5, 1.75, "logging", "logging/", BASE, ["every part's messages"])

    # Offline.
    ax.text(3.55, 3.17, "offline: deltactl (tools/deltactl/) plans, simulates, bounds", fontsize=9.5, color="#4d7a3a",
            va="center")
    box(ax, 6.9, 0.85, 2.45, 1.95, "trace", "formats/", DATA, ["blocks, ops, uses", "docs/trace-format.md"])
    box(ax, 3.55, 0.6, 2.55, 2.2, "planner", "planner/", OFFLINE, ["trace → sim → common", "→ bound → delta", "→ baselines"])
    box(ax, 0.45, 0.85, 2.3, 1.95, "plan", "formats/", DATA, ["keep, swap or rebuild", "docs/plan-format.md"])
    box(ax, 10.1, 0.85, 2.5, 1.95, "other traces", "tools/importers/", OFFLINE, ["execution traces, memory", "snapshots, DTR logs"])

    arrow(ax, (2.75, 5.95), (3.55, 5.95), "malloc / free", offset=(0, 0.18))
    arrow(ax, (6.1, 5.95), (6.9, 5.95), "blocks", offset=(0, 0.18))
    arrow(ax, (2.75, 6.55), (6.9, 6.55), "kernel launches", curve=-0.22, offset=(0, 0.6))
    arrow(ax, (8.12, 5.1), (8.12, 2.8), "writes", offset=(0.4, 0.0))
    arrow(ax, (10.1, 1.82), (9.35, 1.82), "import")
    arrow(ax, (6.9, 1.82), (6.1, 1.82), "reads")
    arrow(ax, (3.55, 1.82), (2.75, 1.82), "writes")
    arrow(ax, (1.6, 2.8), (1.6, 3.6), "loaded by", offset=(0.55, 0.0))
    arrow(ax, (2.75, 4.6), (3.9, 5.1), "evicts, maps back", offset=(-1.05, 0.15))
    arrow(ax, (4.82, 5.1), (4.82, 4.9), "")
    arrow(ax, (2.75, 3.95), (3.55, 3.95), "copies", offset=(0, 0.16))

    fig.savefig(args.output, dpi=110, bbox_inches="tight", facecolor="white")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
