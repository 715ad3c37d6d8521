#!/usr/bin/env python3
"""Views and exports of a DELTA trace.

    report.py TRACE [--html out.html] [--png out.png] [--perfetto out.json] [--memory-viz out.pickle]

TRACE is a DELTA trace (.json or .json.gz). For --memory-viz alone it may also be an allocator
dump written by delta_dump. Without any output option a text summary is printed. See
docs/viewers.md.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import analysis  # noqa: E402  (puts tools/importers on the path)
import delta_trace  # noqa: E402
import memory_viz  # noqa: E402


def _is_allocator_dump(path):
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"delta-allocator-dump"' in head and not head.startswith(b"\x1f\x8b")


def _summary(trace, curve):
    peak, at = curve.peak()
    lines = [f"{trace.model or trace.source}: {len(trace.blocks)} blocks, {len(trace.ops)} ops, "
             f"{len(trace.iterations)} iterations, peak {analysis.format_bytes(peak)} live at "
             f"{analysis.format_ns(at)}"]
    for s in analysis.iteration_summaries(trace, curve):
        lines.append(f"  iteration {s.index}: {analysis.format_ns(s.end_ns - s.start_ns)}, {s.ops} ops, "
                     f"peak {analysis.format_bytes(s.peak_bytes)}")
    for g in analysis.swap_candidates(trace, 5):
        lines.append(f"  swap candidate: block {g.block} ({g.label}, {analysis.format_bytes(g.size)}) "
                     f"idle {analysis.format_ns(g.length_ns)}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="DELTA trace, or (with --memory-viz only) a delta_dump allocator dump")
    parser.add_argument("--html", help="self-contained HTML report")
    parser.add_argument("--png", help="PNG of live memory by category")
    parser.add_argument("--perfetto", help="Chrome trace event JSON for Perfetto / chrome://tracing")
    parser.add_argument("--memory-viz", help="pickled snapshot for PyTorch's memory_viz")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def say(message):
        if not args.quiet:
            print(f"report: {message} ({time.perf_counter() - started:.1f} s)", file=sys.stderr, flush=True)

    try:
        if _is_allocator_dump(args.trace):
            if args.html or args.png or args.perfetto or not args.memory_viz:
                raise ValueError(f"{args.trace} is an allocator dump: only --memory-viz can be made from it")
            snapshot = memory_viz.snapshot_from_allocator_dump(memory_viz.load_allocator_dump(args.trace))
            count = memory_viz.write_snapshot(snapshot, args.memory_viz)
            say(f"wrote {args.memory_viz}: {count} events, {len(snapshot['segments'])} segments")
            return 0
        say(f"reading {args.trace}")
        trace = delta_trace.read(args.trace)
        say(f"read {len(trace.blocks)} blocks and {len(trace.ops)} ops; computing live memory")
        curve = analysis.memory_curve(trace)
        if not (args.html or args.png or args.perfetto or args.memory_viz):
            print(_summary(trace, curve))
        if args.perfetto:
            from perfetto import write_chrome_trace
            say(f"wrote {args.perfetto}: {write_chrome_trace(trace, args.perfetto, curve)} events")
        if args.memory_viz:
            snapshot = memory_viz.snapshot_from_trace(trace)
            say(f"wrote {args.memory_viz}: {memory_viz.write_snapshot(snapshot, args.memory_viz)} events")
        if args.html:
            from html_report import write_html
            say(f"wrote {args.html}: {write_html(trace, args.html, curve)} characters")
        if args.png:
            from png_report import write_png
            write_png(trace, args.png, curve)
            say(f"wrote {args.png}")
    except (delta_trace.TraceError, memory_viz.SnapshotError, ValueError, OSError) as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
