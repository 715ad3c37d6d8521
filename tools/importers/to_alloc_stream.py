#!/usr/bin/env python3
"""Convert a real trace into a DELTA alloc stream (docs/replay.md).

    python3 tools/importers/to_alloc_stream.py <input> -o out.json[.gz] [--format auto|snapshot|dtr]

Formats: a PyTorch memory snapshot pickle, or a DTR op log (JSON lines). Prints one summary line.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from alloc_stream import ImportError_, format_bytes  # noqa: E402
from dtr_log import import_dtr_log  # noqa: E402
from pytorch_snapshot import import_snapshot  # noqa: E402


def detect_format(path):
    with open(path, "rb") as f:
        head = f.read(256)
    if head[:1] == b"\x80":  # pickle protocol 2+ opcode
        return "snapshot"
    if head.lstrip().startswith(b"{") and b'"INSTRUCTION"' in head:
        return "dtr"
    raise ImportError_(f"{path}: unknown trace format (expected a PyTorch memory snapshot pickle "
                       f"or a DTR log); use --format to say which")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Convert a trace into a DELTA alloc stream.")
    parser.add_argument("input", help="PyTorch memory snapshot (.pickle) or DTR log (.log)")
    parser.add_argument("-o", "--output", required=True, help="output path (.json or .json.gz)")
    parser.add_argument("--format", choices=["auto", "snapshot", "dtr"], default="auto")
    parser.add_argument("--device", type=int, default=None,
                        help="snapshot: which device's trace (default: the longest)")
    args = parser.parse_args(argv)
    try:
        if not os.path.isfile(args.input):
            raise ImportError_(f"{args.input}: no such file")
        fmt = detect_format(args.input) if args.format == "auto" else args.format
        builder = import_snapshot(args.input, args.device) if fmt == "snapshot" else import_dtr_log(args.input)
        builder.write(args.output)
    except ImportError_ as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    summary = builder.to_json()["summary"]
    line = (f"{os.path.basename(args.input)} ({fmt}): {len(builder.events)} events "
            f"({summary['allocs']} allocs, {summary['frees']} frees), "
            f"{len(builder.initial_live)} initial live blocks ({format_bytes(summary['initial_live_bytes'])}), "
            f"peak live {format_bytes(summary['peak_live_bytes'])}")
    if builder.native_observed:
        observed = builder.native_observed
        line += (f", native peak reserved {format_bytes(observed['peak_reserved'])} "
                 f"({observed['peak_reserved'] / observed['peak_allocated']:.3f}x)")
    print(f"{line} -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
