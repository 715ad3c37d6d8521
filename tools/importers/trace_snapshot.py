"""Import a PyTorch CUDA memory snapshot pickle as a DELTA access trace.

A snapshot records allocations, not kernels, so the trace has blocks and no ops (and no
iterations). Blocks come from `device_traces[d]` (default: the longest):
  * `alloc` starts a block at `addr` with the requested `size`; `free_completed` ends it;
  * the starting state is reconstructed as in pytorch_snapshot.py (whose reader and rules this
    module uses): a block freed but never allocated in the ring buffer, or allocated in the
    dump's segments but never in the trace, was live before the trace (alloc_ns = -1);
  * times are `time_us` relative to the first event, in ns, clamped so they never go back.
The native allocator's recorded figures (pytorch_snapshot.import_snapshot) go into the metadata.
"""

import sys

import delta_trace as dt
from import_checks import checked
from alloc_stream import ImportError_
from pytorch_snapshot import _blocks_with_addresses, _field, import_snapshot, load_snapshot


def import_snapshot_trace(path, device=None):
    snapshot = load_snapshot(path)
    traces = snapshot["device_traces"]
    if not traces or all(len(t) == 0 for t in traces):
        raise ImportError_(f"{path}: the snapshot has no device trace (was _record_memory_history on?)")
    if device is None:
        device = max(range(len(traces)), key=lambda d: len(traces[d]))
    if not 0 <= device < len(traces):
        raise ImportError_(f"{path}: no trace for device {device} (the snapshot has {len(traces)})")
    events = traces[device]

    blocks = []        # [address, size, stream, alloc_ns, free_ns]; ids assigned after sorting
    live_by_addr = {}  # address -> entry of the block live there
    start_us = None
    last_ns = 0
    for index, entry in enumerate(events):
        action = _field(entry, "action", index)
        if action not in ("alloc", "free_completed"):
            continue  # free_requested is not a free yet; segment events and markers hold no block
        t_us = entry.get("time_us", 0) or 0
        if start_us is None:
            start_us = t_us
        last_ns = max(last_ns, int(round((t_us - start_us) * 1000)))
        addr = _field(entry, "addr", index)  # numbers checked by load_snapshot, by place
        size = _field(entry, "size", index)
        if action == "alloc":
            if addr in live_by_addr:
                raise ImportError_(f"device_traces event {index}: alloc at {addr:#x}, which is still allocated")
            block = [addr, size, entry.get("stream", 0), last_ns, dt.NEVER]
            live_by_addr[addr] = block
            blocks.append(block)
        else:
            block = live_by_addr.pop(addr, None)
            if block is None:  # allocated before the oldest kept event
                block = [addr, size, entry.get("stream", 0), dt.NEVER, dt.NEVER]
                blocks.append(block)
            block[4] = last_ns

    for segment in snapshot["segments"]:
        if segment.get("device", 0) != device:
            continue
        for seg_block in _blocks_with_addresses(segment):
            if seg_block["state"] in ("active_allocated", "active_pending_free") \
                    and seg_block["address"] not in live_by_addr:
                size = seg_block.get("requested_size") or seg_block["size"]
                blocks.append([seg_block["address"], size, segment.get("stream", 0), dt.NEVER, dt.NEVER])

    # Ids: live-before-the-trace blocks first (by address), then the trace's in event order.
    blocks.sort(key=lambda b: (b[3] != dt.NEVER, b[3] if b[3] != dt.NEVER else b[0]))
    trace = dt.Trace(source="pytorch-snapshot", model="")
    trace.gpu = dt.GpuInfo()
    for i, (addr, size, stream, alloc_ns, free_ns) in enumerate(blocks):
        if size <= 0:
            raise ImportError_(f"{path}: block at {addr:#x} has size {size}")
        trace.blocks.append(dt.Block(id=i, size=size, address=addr, stream=stream, alloc_ns=alloc_ns,
                                     free_ns=free_ns))
    settings = snapshot.get("allocator_settings") or {}
    trace.allocator_settings = {str(k): str(v) for k, v in settings.items()} if isinstance(settings, dict) else {}
    trace.metadata["path"] = str(path)
    trace.metadata["device_index"] = str(device)
    if not trace.blocks:
        raise ImportError_(f"{path}: device {device}'s trace allocates nothing and no block is live at the dump: "
                           f"no blocks")
    trace.metadata["ops"] = "none: a memory snapshot records allocations, not kernels"

    # The recorded native figures, from the alloc-stream importer (its stderr warning would repeat).
    stderr, sys.stderr = sys.stderr, open("/dev/null", "w")
    try:
        observed = import_snapshot(path, device).native_observed
    finally:
        sys.stderr.close()
        sys.stderr = stderr
    for key, value in observed.items():
        trace.metadata[f"native_{key}"] = str(value)
    return checked(trace, path)
