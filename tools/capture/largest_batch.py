#!/usr/bin/env python3
"""Find the largest batch of a model that fits a GPU natively, and with DELTA's planner.

    largest_batch.py --model gpt2-xl --seq 1024 [--gpu h200] [--budget 140GiB] [--max-overhead 0.2]

Each batch tried is captured on the meta device (tools/capture/capture.py) and planned twice
with `deltactl plan`: `--method native` (feasible when the step as recorded fits the budget, through
the caching allocator capped at it, deltactl's default) and
`--method delta` (feasible, and kept only when its step time is at most 1 + max-overhead times the
native one). Each criterion is searched by doubling the batch from 1 until it fails, then by
bisection between the last batch that passed and the first that failed; batches already captured
or planned are not redone. The search assumes that once a batch fails, every larger one fails too.
See docs/capture.md.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import paths  # noqa: E402,F401
import cost_model  # noqa: E402

UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
GIB = float(1 << 30)


class SearchError(Exception):
    """A problem that ends the search; its text is the one-line message the user sees."""


def parse_bytes(text):
    """'140GiB', '512MiB', '6442450944' -> bytes. Fractions of a peak are not budgets here: the
    budget is the GPU's memory, the same for every batch."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text or "")
    if not match or match.group(2) not in UNITS:
        raise SearchError(f"budget '{text}' is not a byte count (examples: 140GiB, 512MiB, 6442450944)")
    value = int(float(match.group(1)) * UNITS[match.group(2)])
    # deltactl reads a unitless number <= 1 as a fraction of the native peak; a budget that small
    # is meaningless anyway, so refuse it rather than let the two readings meet.
    if value < (1 << 20):
        raise SearchError(f"budget '{text}' is below 1 MiB")
    return value


def find_deltactl(explicit=None):
    """The deltactl binary: the one named, else the project's build/ folder, else PATH, else the
    newest of the other build-*/ folders."""
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise SearchError(f"deltactl '{explicit}' does not exist or is not executable")
        return explicit
    default = os.path.join(ROOT, "build", "tools", "deltactl", "deltactl")
    candidates = [default]
    on_path = shutil.which("deltactl")
    if on_path:
        candidates.append(on_path)
    others = glob.glob(os.path.join(ROOT, "build-*", "tools", "deltactl", "deltactl"))
    candidates += sorted(others, key=os.path.getmtime, reverse=True)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise SearchError("deltactl not found in build/tools/deltactl, on PATH or in build-*/; build it "
                      "(cmake --build <dir> --target deltactl) or pass --deltactl PATH")


class Prober:
    """Captures and plans batches on demand, each at most once."""

    def __init__(self, model, seq, gpu, budget, deltactl, workdir, say, dtype="float32"):
        self.model, self.seq, self.gpu, self.budget, self.dtype = model, seq, gpu, budget, dtype
        self.deltactl, self.workdir, self.say = deltactl, workdir, say
        self.records = {}  # batch -> what was learnt about it

    def _stem(self, batch):
        seq = f"-s{self.seq}" if self.seq else ""
        dtype = "" if self.dtype == "float32" else f"-{self.dtype}"
        return os.path.join(self.workdir, f"{self.model}{seq}-b{batch}-{self.gpu}{dtype}")

    def _capture(self, batch):
        import capture
        import delta_trace
        path = self._stem(batch) + ".json.gz"
        started = time.perf_counter()
        try:
            trace = capture.capture(self.model, batch, self.seq, self.gpu, dtype=self.dtype)
            live_peak = delta_trace.peak_live(trace)[0]
            delta_trace.write(trace, path)
        except Exception as e:  # torch raises many kinds; any of them ends the search the same way
            message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SearchError(f"capture of {self.model} batch {batch} failed: {message}") from None
        return path, live_peak, time.perf_counter() - started

    def _plan(self, trace_path, batch, method):
        """The plan's 'predicted' object, or None with deltactl's reason when no plan is feasible."""
        output = f"{self._stem(batch)}-{method}.plan.json"
        command = [self.deltactl, "plan", trace_path, "--budget", str(self.budget), "--gpu", self.gpu,
                   "--method", method, "-o", output]
        try:
            done = subprocess.run(command, capture_output=True, text=True)
        except OSError as e:
            raise SearchError(f"cannot run {self.deltactl}: {e}") from None
        if done.returncode != 0:
            reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            # Only "no feasible plan" is an answer; anything else (unreadable trace, unknown GPU)
            # would make every batch look infeasible, so it stops the search.
            if "no feasible plan" not in reason:
                raise SearchError(f"deltactl plan failed on {trace_path} ({method}): {reason}")
            return None, re.sub(r"^deltactl: error: ", "", reason)
        try:
            with open(output, encoding="utf-8") as f:
                return json.load(f)["predicted"], None
        except (OSError, ValueError, KeyError) as e:
            raise SearchError(f"deltactl wrote no readable plan to {output}: {e}") from None

    def probe(self, batch):
        if batch in self.records:
            return self.records[batch]
        trace_path, live_peak, capture_s = self._capture(batch)
        started = time.perf_counter()
        native, native_reason = self._plan(trace_path, batch, "native")
        delta, delta_reason = self._plan(trace_path, batch, "delta")
        plan_s = time.perf_counter() - started
        record = {
            "batch": batch, "live_peak_bytes": live_peak,
            "native_feasible": bool(native and native.get("feasible")),
            "native_peak_bytes": native["peak_bytes"] if native else None,
            "delta_feasible": bool(delta and delta.get("feasible")),
            "delta_overhead": delta["overhead"] if delta else None,
            "delta_peak_bytes": delta["peak_bytes"] if delta else None,
            "delta_reason": delta_reason, "native_reason": native_reason,
            "capture_s": round(capture_s, 2), "plan_s": round(plan_s, 2),
        }
        self.records[batch] = record
        overhead = f"{record['delta_overhead']:.3f}" if delta else "infeasible"
        self.say(f"batch {batch}: native peak {live_peak / GIB:.2f} GiB "
                 f"({'fits' if record['native_feasible'] else 'does not fit'}), delta overhead {overhead}, "
                 f"planning {plan_s:.1f} s, capture {capture_s:.1f} s")
        return record


def largest_passing(passes, max_batch):
    """(largest batch in 1..max_batch that passes, smallest batch found to fail or None), by
    doubling then bisection. Assumes a batch passes only if every smaller one does."""
    if not passes(1):
        return 0, 1
    good, bad = 1, None
    while bad is None and good < max_batch:
        step = min(good * 2, max_batch)
        if passes(step):
            good = step
        else:
            bad = step
    if bad is None:
        return good, None
    while bad - good > 1:
        middle = (good + bad) // 2
        if passes(middle):
            good = middle
        else:
            bad = middle
    return good, bad


def monotonicity_warnings(records, native_batch, delta_batch, max_overhead):
    """What the tried batches say against the assumption the search rests on: a batch that
    passes above an answer or fails below it, or DELTA's overhead dropping as the batch grows
    (the planner's choices change with the batch; a drop means a nearby batch may be misjudged)."""
    warnings = []
    for b, r in sorted(records.items()):
        if r["native_feasible"] != (b <= native_batch):
            warnings.append(f"native: batch {b} {'fits' if r['native_feasible'] else 'does not fit'} "
                            f"although the answer is {native_batch}")
        within = r["delta_feasible"] and r["delta_overhead"] <= 1.0 + max_overhead
        if within != (b <= delta_batch):
            warnings.append(f"delta: batch {b} is {'within' if within else 'over'} the overhead bound "
                            f"although the answer is {delta_batch}")
    planned = [(b, r["delta_overhead"]) for b, r in sorted(records.items()) if r["delta_feasible"]]
    for (b1, o1), (b2, o2) in zip(planned, planned[1:]):
        if o2 < o1 - 0.02:
            warnings.append(f"delta: overhead falls from {o1:.3f} at batch {b1} to {o2:.3f} at batch {b2}")
    return warnings


def search(model, seq, gpu, budget, max_overhead, max_batch, deltactl, workdir, say, dtype="float32"):
    prober = Prober(model, seq, gpu, budget, deltactl, workdir, say, dtype)

    def native_fits(batch):
        return prober.probe(batch)["native_feasible"]

    def delta_fits(batch):
        record = prober.probe(batch)
        return record["delta_feasible"] and record["delta_overhead"] <= 1.0 + max_overhead

    native_batch, native_bad = largest_passing(native_fits, max_batch)
    delta_batch, delta_bad = largest_passing(delta_fits, max_batch)
    at = prober.records
    result = {
        "model": model, "seq": seq, "dtype": dtype, "gpu": gpu, "budget_bytes": budget, "max_overhead": max_overhead,
        "max_batch": max_batch, "deltactl": deltactl,
        "native": {"batch": native_batch, "capped": native_bad is None and native_batch == max_batch,
                   "peak_bytes": at[native_batch]["native_peak_bytes"] if native_batch else None,
                   "next_batch": native_bad,
                   "next_live_peak_bytes": at[native_bad]["live_peak_bytes"] if native_bad else None},
        "delta": {"batch": delta_batch, "capped": delta_bad is None and delta_batch == max_batch,
                  "overhead": at[delta_batch]["delta_overhead"] if delta_batch else None,
                  "peak_bytes": at[delta_batch]["delta_peak_bytes"] if delta_batch else None,
                  "next_batch": delta_bad,
                  "next_overhead": at[delta_bad]["delta_overhead"] if delta_bad else None,
                  "next_reason": at[delta_bad]["delta_reason"] if delta_bad else None},
        "gain": (delta_batch / native_batch) if native_batch else None,
        "tried": [at[b] for b in sorted(at)],
        "warnings": monotonicity_warnings(at, native_batch, delta_batch, max_overhead),
    }
    for warning in result["warnings"]:
        say(f"warning: {warning}")
    return result


def report(result):
    def batch_text(part):
        return f"{part['batch']}" + (" (max-batch reached)" if part["capped"] else "")

    native, delta = result["native"], result["delta"]
    rows = [("", "largest batch", "peak GiB", "overhead", "next batch tried")]
    native_next = (f"{native['next_batch']} (peak {native['next_live_peak_bytes'] / GIB:.2f} GiB)"
                   if native["next_batch"] else "-")
    rows.append(("native", batch_text(native),
                 f"{native['peak_bytes'] / GIB:.2f}" if native["peak_bytes"] else "-", "1.000", native_next))
    if delta["next_batch"] is None:
        delta_next = "-"
    elif delta["next_overhead"] is not None:
        delta_next = f"{delta['next_batch']} (overhead {delta['next_overhead']:.3f})"
    else:
        delta_next = f"{delta['next_batch']} (no feasible plan)"
    rows.append(("delta", batch_text(delta), f"{delta['peak_bytes'] / GIB:.2f}" if delta["peak_bytes"] else "-",
                 f"{delta['overhead']:.3f}" if delta["overhead"] is not None else "-", delta_next))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    seq = f" seq {result['seq']}" if result["seq"] else ""
    seq += f" {result['dtype']}" if result["dtype"] != "float32" else ""
    lines = [f"{result['model']}{seq} on {result['gpu']}, budget {result['budget_bytes'] / GIB:.2f} GiB, "
             f"DELTA overhead at most {1 + result['max_overhead']:.2f}x native"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    gain = f"{result['gain']:.2f}x" if result["gain"] is not None else "n/a (nothing fits natively)"
    lines.append(f"gain: {gain}")
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a model tools/capture/models.py knows (gpt2-xl, resnet50, ...)")
    parser.add_argument("--seq", type=int, help="sequence length for the transformers (capture.py's default when absent)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="the model's dtype while captured (default float32)")
    parser.add_argument("--gpu", default="h200", help="GPU profile: h200 (default), a100, v100, titanv")
    parser.add_argument("--budget", help="memory budget in bytes or KiB/MiB/GiB (default: the GPU's memory)")
    parser.add_argument("--max-overhead", type=float, default=0.20,
                        help="DELTA's step may take at most 1 + this times the native step (default 0.20)")
    parser.add_argument("--deltactl", help="the deltactl binary (default: build/, PATH, then build-*/)")
    parser.add_argument("--max-batch", type=int, default=1024, help="largest batch to try (default 1024)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--keep", metavar="DIR", help="keep traces and plans in DIR")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    say = (lambda m: None) if args.quiet else (lambda m: print(f"largest_batch: {m}", file=sys.stderr, flush=True))

    try:
        if args.max_batch < 1:
            raise SearchError(f"--max-batch must be at least 1, got {args.max_batch}")
        if not args.max_overhead >= 0:
            raise SearchError(f"--max-overhead must be at least 0, got {args.max_overhead}")
        if args.seq is not None and args.seq < 1:
            raise SearchError(f"--seq must be at least 1, got {args.seq}")
        try:
            profile = cost_model.profile(args.gpu)
        except ValueError as e:
            raise SearchError(str(e)) from None
        budget = parse_bytes(args.budget) if args.budget else profile.memory_bytes
        deltactl = find_deltactl(args.deltactl)
        import models  # imports torch: after the cheap checks
        if args.model not in models.BUILDERS:
            raise SearchError(f"unknown model '{args.model}' (known: {', '.join(sorted(models.BUILDERS))})")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            result = search(args.model, args.seq, profile.name, budget, args.max_overhead, args.max_batch,
                            deltactl, args.keep, say, args.dtype)
        else:
            with tempfile.TemporaryDirectory(prefix="largest-batch-") as workdir:
                result = search(args.model, args.seq, profile.name, budget, args.max_overhead, args.max_batch,
                                deltactl, workdir, say, args.dtype)
    except SearchError as e:
        print(f"largest_batch: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"largest_batch: error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
