"""What the viewers show, computed once from a trace: live bytes over time by category, the
largest blocks, idle gaps between uses (swap candidates) and a per-iteration summary."""

import os
import sys
from dataclasses import dataclass

_IMPORTERS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "importers"))
if _IMPORTERS not in sys.path:
    sys.path.insert(0, _IMPORTERS)

from delta_trace import NEVER, Category  # noqa: E402

CATEGORIES = [c.name.lower() for c in Category]


def category_name(category):
    return Category(category).name.lower()


def trace_span(trace):
    """(start, end) of the trace in ns: ops, iterations and block times all count."""
    times = [op.start_ns for op in trace.ops] + [op.start_ns + op.duration_ns for op in trace.ops]
    times += [t for b in trace.blocks for t in (b.alloc_ns, b.free_ns) if t != NEVER]
    times += [t for it in trace.iterations for t in (it.start_ns, it.end_ns)]
    return (min(times), max(times)) if times else (0, 0)


@dataclass
class MemoryCurve:
    times: list          # ns, change points in increasing order
    by_category: dict    # category name -> live bytes from times[i] until times[i + 1]
    total: list

    def peak(self):
        if not self.total:
            return 0, 0
        i = max(range(len(self.total)), key=self.total.__getitem__)
        return self.total[i], self.times[i]


def memory_curve(trace):
    """Live bytes by category as a step function. A block live before the trace counts from
    the trace's start, one live after it until its end; a free and an allocation at the same
    instant settle the free first, so back-to-back reuse does not count twice."""
    start, end = trace_span(trace)
    deltas = {}
    for b in trace.blocks:
        name = category_name(b.category)
        alloc = start if b.alloc_ns == NEVER else b.alloc_ns
        free = end if b.free_ns == NEVER else b.free_ns
        if free <= alloc and b.free_ns != NEVER:
            continue  # freed the instant it was made: never occupied memory over time
        deltas.setdefault(alloc, {}).setdefault(name, 0)
        deltas[alloc][name] += b.size
        if b.free_ns != NEVER:
            deltas.setdefault(free, {}).setdefault(name, 0)
            deltas[free][name] -= b.size
    live = {name: 0 for name in CATEGORIES}
    curve = MemoryCurve([], {name: [] for name in CATEGORIES}, [])
    for t in sorted(deltas):
        for name, delta in deltas[t].items():
            live[name] += delta
        curve.times.append(t)
        for name in CATEGORIES:
            curve.by_category[name].append(live[name])
        curve.total.append(sum(live.values()))
    if curve.times and curve.times[-1] < end:
        curve.times.append(end)
        for name in CATEGORIES:
            curve.by_category[name].append(live[name])
        curve.total.append(sum(live.values()))
    return curve


@dataclass
class IdleGap:
    block: int
    size: int
    category: str
    label: str
    start_ns: int        # end of the use before the gap
    end_ns: int          # start of the use after it

    @property
    def length_ns(self):
        return self.end_ns - self.start_ns


def block_uses(trace):
    """block id -> [(start, end) of each op that uses it], in time order."""
    uses = {}
    for op in trace.ops:
        for block_id, _ in op.blocks:
            spans = uses.setdefault(block_id, [])
            span = (op.start_ns, op.start_ns + op.duration_ns)
            if not spans or spans[-1] != span:
                spans.append(span)
    return uses


def idle_gaps(trace, uses=None):
    """For every block used at least twice, its longest interval between consecutive uses."""
    uses = block_uses(trace) if uses is None else uses
    by_id = {b.id: b for b in trace.blocks}
    gaps = []
    for block_id, spans in uses.items():
        best = None
        for (_, previous_end), (next_start, _) in zip(spans, spans[1:]):
            if next_start > previous_end and (best is None or next_start - previous_end > best[1] - best[0]):
                best = (previous_end, next_start)
        if best:
            b = by_id[block_id]
            gaps.append(IdleGap(block_id, b.size, category_name(b.category), b.label, best[0], best[1]))
    return gaps


def swap_candidates(trace, count=20, uses=None):
    """The gaps that would free the most memory for the longest: ranked by bytes x idle time."""
    return sorted(idle_gaps(trace, uses), key=lambda g: (g.size * g.length_ns, g.size), reverse=True)[:count]


def largest_blocks(trace, count=20, uses=None):
    """The biggest blocks, each with its longest idle gap (None when used fewer than twice)."""
    gaps = {g.block: g for g in idle_gaps(trace, uses)}
    ranked = sorted(trace.blocks, key=lambda b: (b.size, -b.id), reverse=True)[:count]
    return [(b, gaps.get(b.id)) for b in ranked]


@dataclass
class IterationSummary:
    index: int
    start_ns: int
    end_ns: int
    ops: int
    ops_by_phase: dict
    peak_bytes: int
    allocated_bytes: int   # bytes of blocks allocated inside the iteration
    estimated: bool        # any duration came from a cost model


def iteration_summaries(trace, curve=None):
    curve = memory_curve(trace) if curve is None else curve
    iterations = trace.iterations
    if not iterations and trace.ops:  # a trace without markers: the whole of it as one
        start, end = trace_span(trace)
        iterations = [type("Whole", (), dict(index=0, start_ns=start, end_ns=end, first_op=0,
                                               end_op=len(trace.ops)))()]
    rows = []
    for it in iterations:
        ops = trace.ops[it.first_op:it.end_op]
        by_phase = {}
        for op in ops:
            name = getattr(op.phase, "name", str(op.phase)).lower()
            by_phase[name] = by_phase.get(name, 0) + 1
        peak = 0
        for i, t in enumerate(curve.times):
            next_t = curve.times[i + 1] if i + 1 < len(curve.times) else t
            if next_t > it.start_ns and t < it.end_ns or t == it.start_ns:
                peak = max(peak, curve.total[i])
        allocated = sum(b.size for b in trace.blocks if b.alloc_ns != NEVER and it.start_ns <= b.alloc_ns < it.end_ns)
        rows.append(IterationSummary(it.index, it.start_ns, it.end_ns, len(ops), by_phase, peak, allocated,
                                     any(op.duration_estimated for op in ops)))
    return rows


def format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"


def format_ns(ns):
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns} ns"
