"""Snapshots that PyTorch's memory viewer opens (torch.cuda._memory_viz, pytorch.org/memory_viz):
the dict torch.cuda.memory._snapshot() returns, pickled, made from a DELTA trace or from a DELTA
allocator dump (delta_dump JSON).

The viewer reads `device_traces[device]`, a time-ordered list of {action, addr, size, stream,
time_us, frames}, and `segments`, the allocator's state when the snapshot was taken, from which it
infers what was live before the first event: a block freed without an alloc event, or found
allocated in a segment without one, was live from the start.
"""

import json
import os
import pickle

from analysis import category_name

NEVER = -1
_ALIGN = 512


class SnapshotError(ValueError):
    pass


def _frames(*names):
    return [{"name": name, "filename": "", "line": 0} for name in names if name]


def _segment(address, size, state, requested, stream, frames, segment_type="large", expandable=False):
    active = size if state != "inactive" else 0
    return {"device": 0, "address": address, "total_size": size, "allocated_size": active,
            "active_size": active, "requested_size": requested if active else 0, "stream": stream,
            "segment_type": segment_type, "segment_pool_id": (0, 0), "is_expandable": expandable,
            "frames": frames,
            "blocks": [{"address": address, "size": size, "requested_size": requested if active else size,
                        "state": state, "frames": frames}]}


def snapshot_from_trace(trace, base_address=1 << 40):
    """Blocks with a device address keep it; the others get distinct synthetic addresses (never
    reused, so every allocation in the viewer is its own). Each block live at the end becomes a
    one-block segment, so that blocks live throughout show up as allocated before the trace."""
    events = []
    segments = []
    next_address = base_address
    for b in sorted(trace.blocks, key=lambda b: b.id):
        address = b.address
        if address == 0:
            address = next_address
            next_address += (b.size + _ALIGN - 1) // _ALIGN * _ALIGN
        frames = _frames(b.label or f"block {b.id}", category_name(b.category))
        common = {"addr": address, "size": b.size, "stream": b.stream, "frames": frames}
        if b.free_ns == NEVER:
            segments.append(_segment(address, b.size, "active_allocated", b.size, b.stream, frames))
        elif b.free_ns == b.alloc_ns:
            continue  # freed the instant it was made: it never held memory over time
        if b.alloc_ns != NEVER:
            events.append((b.alloc_ns, 1, b.id, dict(common, action="alloc", time_us=b.alloc_ns // 1000)))
        if b.free_ns != NEVER:
            for order, action in ((0, "free_requested"), (0, "free_completed")):
                events.append((b.free_ns, order, b.id, dict(common, action=action, time_us=b.free_ns // 1000)))
    # Frees at an instant come before allocations at it, as the trace settles them.
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    return {"segments": segments, "device_traces": [[e[3] for e in events]],
            "allocator_settings": dict(trace.allocator_settings),
            "external_annotations": []}


_DUMP_ACTIONS = {"alloc": ["alloc"], "free": ["free_requested", "free_completed"],
                 "free_deferred": ["free_requested"], "free_completed": ["free_completed"],
                 "map": ["segment_map"], "unmap": ["segment_unmap"], "oom": ["oom"]}
_DUMP_STATES = {"allocated": "active_allocated", "pending": "active_pending_free",
                "free": "inactive", "binned": "inactive"}


def _need(doc, key, place):
    if not isinstance(doc, dict) or key not in doc:
        raise SnapshotError(f"{place}: missing '{key}'")
    return doc[key]


def snapshot_from_allocator_dump(dump):
    """The allocator dump (format "delta-allocator-dump", docs/allocator.md, "The dump") as a snapshot:
    events become the device trace, arenas become segments (VMM arenas are expandable)."""
    if not isinstance(dump, dict) or dump.get("format") != "delta-allocator-dump":
        raise SnapshotError("not a DELTA allocator dump (expected \"format\": \"delta-allocator-dump\")")
    free_bytes = 0
    device = dump.get("device") or {}
    stats = dump.get("stats") or {}
    if isinstance(device.get("total_bytes"), int) and isinstance(stats.get("reserved_bytes"), int):
        free_bytes = max(0, device["total_bytes"] - stats["reserved_bytes"])
    trace = []
    for i, event in enumerate(_need(dump, "events", "dump")):
        place = f"events[{i}]"
        kind = _need(event, "kind", place)
        for field in ("t_ns", "ptr", "size", "stream"):
            if not isinstance(_need(event, field, place), int):
                raise SnapshotError(f"{place}.{field}: must be an integer")
        for action in _DUMP_ACTIONS.get(kind, []):  # empty_cache and unknown kinds carry no block
            entry = {"action": action, "addr": event["ptr"], "size": event["size"], "stream": event["stream"],
                     "time_us": event["t_ns"] // 1000, "frames": []}
            if action == "oom":
                entry["device_free"] = free_bytes
            trace.append(entry)
    segments = []
    for a, arena in enumerate(_need(dump, "arenas", "dump")):
        place = f"arenas[{a}]"
        blocks = []
        for j, block in enumerate(_need(arena, "blocks", place)):
            state = _DUMP_STATES.get(_need(block, "state", f"{place}.blocks[{j}]"))
            if state is None:
                raise SnapshotError(f"{place}.blocks[{j}].state: unknown state '{block['state']}'")
            size = _need(block, "size", f"{place}.blocks[{j}]")
            requested = block.get("requested", size) if state != "inactive" else size
            blocks.append({"address": _need(block, "ptr", f"{place}.blocks[{j}]"), "size": size,
                           "requested_size": requested, "state": state, "frames": []})
        if not blocks:
            continue
        total = sum(b["size"] for b in blocks)
        active = sum(b["size"] for b in blocks if b["state"] != "inactive")
        segments.append({"device": 0, "address": blocks[0]["address"], "total_size": total,
                         "allocated_size": active, "active_size": active,
                         "requested_size": sum(b["requested_size"] for b in blocks if b["state"] != "inactive"),
                         "stream": arena.get("stream", 0), "segment_type": arena.get("pool", "large"),
                         "segment_pool_id": (0, 0), "is_expandable": True, "frames": [], "blocks": blocks})
    settings = {k: v for k, v in (dump.get("config") or {}).items() if v is not None}
    return {"segments": segments, "device_traces": [trace], "allocator_settings": settings,
            "external_annotations": []}


def load_allocator_dump(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise SnapshotError(f"{path}: cannot read an allocator dump ({e})") from None


def write_snapshot(snapshot, path):
    temp = f"{path}.tmp.{os.getpid()}"
    with open(temp, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    os.replace(temp, path)
    return sum(len(t) for t in snapshot["device_traces"])
