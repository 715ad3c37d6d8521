#!/usr/bin/env python3
"""Convert a real trace into a DELTA access trace (docs/trace-format.md).

    python3 tools/importers/to_trace.py <input> [--kineto K] [--gpu PROFILE] -o out.json[.gz]

Inputs, detected by content: a PyTorch Execution Trace (JSON, optionally gzip; join a Kineto
profile of the same run with --kineto for measured durations), a PyTorch memory snapshot pickle,
or a DTR op log. Prints one summary line.
"""

import argparse
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cost_model  # noqa: E402
import delta_trace as dt  # noqa: E402
from alloc_stream import ImportError_, format_bytes  # noqa: E402
from trace_dtr import import_dtr_trace  # noqa: E402
from trace_et import import_et_trace  # noqa: E402
from trace_snapshot import import_snapshot_trace  # noqa: E402


def detect_format(path):
    with open(path, "rb") as f:
        head = f.read(4096)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                head = f.read(4096)
        except (OSError, EOFError) as e:
            raise ImportError_(f"{path}: unreadable gzip file ({e})") from None
    if head[:1] == b"\x80":  # pickle protocol 2+ opcode
        return "snapshot"
    text = head.lstrip()
    if text.startswith(b"{") and b'"INSTRUCTION"' in head.split(b"\n", 1)[0]:
        return "dtr"
    if text.startswith(b"{") and b'"schema"' in head and b'"nodes"' in head:
        return "et"
    raise ImportError_(f"{path}: unknown trace format (expected a PyTorch Execution Trace, a PyTorch memory "
                       f"snapshot pickle or a DTR log); use --format to say which")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Convert a trace into a DELTA access trace.")
    parser.add_argument("input", help="execution trace (.json[.gz]), memory snapshot (.pickle) or DTR log (.log)")
    parser.add_argument("-o", "--output", required=True, help="output path (.json or .json.gz)")
    parser.add_argument("--format", choices=["auto", "et", "snapshot", "dtr"], default="auto")
    parser.add_argument("--kineto", help="execution traces: the Kineto profile of the same run")
    parser.add_argument("--gpu", default=None,
                        help=f"GPU profile for estimated durations ({', '.join(cost_model.PROFILES)}; default titanv)")
    parser.add_argument("--device", type=int, default=None, help="snapshots: which device (default: the longest)")
    parser.add_argument("--quiet", action="store_true", help="no summary line (warnings and errors still go to stderr)")
    args = parser.parse_args(argv)
    try:
        if not os.path.isfile(args.input):
            raise ImportError_(f"{args.input}: no such file")
        if args.kineto is not None and not os.path.isfile(args.kineto):
            raise ImportError_(f"{args.kineto}: no such file")
        gpu = args.gpu or "titanv"
        cost_model.profile(gpu)  # refuses unknown names before any work
        fmt = detect_format(args.input) if args.format == "auto" else args.format
        if args.kineto is not None and fmt != "et":
            raise ImportError_("--kineto applies to execution traces only")
        if fmt == "et":
            trace = import_et_trace(args.input, args.kineto, gpu)
        elif fmt == "snapshot":
            trace = import_snapshot_trace(args.input, args.device)
        else:
            trace = import_dtr_trace(args.input)
            if args.gpu:
                trace.gpu.profile = gpu
        size = dt.write(trace, args.output)
    except (ImportError_, dt.TraceError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.quiet:
        return 0
    peak, _ = dt.peak_live(trace)
    estimated = sum(1 for op in trace.ops if op.duration_estimated)
    total = sum(op.duration_ns for op in trace.ops)
    print(f"{os.path.basename(args.input)} ({fmt}): {len(trace.ops)} ops ({estimated} estimated), "
          f"{len(trace.blocks)} blocks, peak live {format_bytes(peak)}, op time {total / 1e6:.3f} ms "
          f"-> {args.output} ({format_bytes(size)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
