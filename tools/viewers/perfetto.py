"""Chrome trace event JSON (opens in Perfetto UI and chrome://tracing): one track of ops per
stream, and counter tracks of live bytes (total and by category) from the blocks' lifetimes."""

import json
import os

from analysis import CATEGORIES, memory_curve

OPS_PID = 1
MEMORY_PID = 2


def _us(ns):
    return ns / 1000.0


def chrome_trace(trace, curve=None):
    curve = memory_curve(trace) if curve is None else curve
    events = [
        {"ph": "M", "pid": OPS_PID, "name": "process_name", "args": {"name": f"GPU ops ({trace.gpu.name or 'unknown GPU'})"}},
        {"ph": "M", "pid": MEMORY_PID, "name": "process_name", "args": {"name": "Memory (live bytes)"}},
    ]
    for stream in sorted({op.stream for op in trace.ops}):
        events.append({"ph": "M", "pid": OPS_PID, "tid": stream, "name": "thread_name",
                       "args": {"name": f"stream {stream}"}})
    for op in trace.ops:
        reads = sum(1 for _, a in op.blocks if int(a) == 0)
        writes = sum(1 for _, a in op.blocks if int(a) == 1)
        events.append({
            "ph": "X", "pid": OPS_PID, "tid": op.stream, "name": op.name,
            "cat": getattr(op.phase, "name", str(op.phase)).lower(),
            "ts": _us(op.start_ns), "dur": _us(op.duration_ns),
            "args": {"id": op.id, "iteration": op.iteration, "kind": getattr(op.kind, "name", str(op.kind)).lower(),
                     "blocks read": reads, "blocks written": writes, "flops": op.flops,
                     "estimated": bool(op.duration_estimated)},
        })
    used = [name for name in CATEGORIES if any(curve.by_category[name])]
    for i, t in enumerate(curve.times):
        events.append({"ph": "C", "pid": MEMORY_PID, "name": "live bytes", "ts": _us(t),
                       "args": {"total": curve.total[i]}})
        events.append({"ph": "C", "pid": MEMORY_PID, "name": "live bytes by category", "ts": _us(t),
                       "args": {name: curve.by_category[name][i] for name in used}})
    for it in trace.iterations:
        events.append({"ph": "i", "pid": OPS_PID, "tid": 0, "s": "p", "name": f"iteration {it.index}",
                       "ts": _us(it.start_ns)})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"source": trace.source, "model": trace.model}}


def write_chrome_trace(trace, path, curve=None):
    data = chrome_trace(trace, curve)
    temp = f"{path}.tmp.{os.getpid()}"
    with open(temp, "w", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
    os.replace(temp, path)
    return len(data["traceEvents"])
