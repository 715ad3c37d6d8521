"""Import a PyTorch CUDA memory snapshot (torch.cuda.memory._dump_snapshot) as an alloc stream.

The snapshot's device_traces are a ring buffer: the run was already under way when the oldest
kept event happened. The starting state is reconstructed from two clues:
  * a block freed in the trace that was never allocated in it was live at the start;
  * a block allocated in `segments` at dump time that the trace never allocated was live at
    the start and stayed live throughout.
Both become `initial_live` blocks, listed by address (the best guess at their original order).

What the native allocator actually did is read from the segment events: reserved bytes at the
start are the segments at dump time minus the segment bytes created during the trace plus the
segment bytes released during it; walking the trace from there gives reserved bytes over time.
"""

import io
import pickle
import sys

from alloc_stream import AllocStreamBuilder, ImportError_

SEGMENT_GROWTH = ("segment_alloc", "segment_map")
SEGMENT_SHRINK = ("segment_free", "segment_unmap")


class _PlainDataUnpickler(pickle._Unpickler):  # noqa: SLF001 - the pure-Python one, on purpose
    """Snapshots hold only dicts, lists, tuples, strings and numbers. Refusing every class keeps
    a hostile pickle from running code and needs no torch.

    The pure-Python unpickler, not the C one: the C one sizes its memo table by the largest
    index a PUT opcode names and zeroes it, so one damaged 4-byte index makes it touch up to
    32 GiB (a fuzzed 435-byte file took 3.8 GiB here). The Python one keeps the memo in a dict,
    so its memory follows the file's size; it reads 3 MB of snapshot in about 0.4 s."""

    dispatch = dict(pickle._Unpickler.dispatch)  # noqa: SLF001

    def _refuse_bytearray(self):
        # It allocates the length the file names before reading (a damaged 8-byte length is
        # any size); snapshots hold no byte arrays.
        raise ImportError_("snapshot pickle holds a byte array; a memory snapshot holds only plain data")

    dispatch[pickle.BYTEARRAY8[0]] = _refuse_bytearray

    def find_class(self, module, name):
        raise ImportError_(f"snapshot pickle refers to {module}.{name}; a memory snapshot holds only plain data")


def load_snapshot(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        snapshot = _PlainDataUnpickler(io.BytesIO(data)).load()
    except (ImportError_, MemoryError):  # a file too large for this machine is not a corrupt one
        raise
    except Exception as e:  # pickle raises many types on corrupt input
        raise ImportError_(f"{path}: not a readable pickle ({e})") from None
    if not isinstance(snapshot, dict) or "device_traces" not in snapshot or "segments" not in snapshot:
        raise ImportError_(f"{path}: not a PyTorch memory snapshot (needs 'device_traces' and 'segments')")
    _check_shape(snapshot, path)
    return snapshot


def _check_shape(snapshot, path):
    """The containers the importers walk: lists of dicts where a snapshot has them, so that a
    damaged file is refused here, by place, rather than failing somewhere inside."""
    traces = snapshot["device_traces"]
    if not isinstance(traces, list):
        raise ImportError_(f"{path}: device_traces is not a list")
    for d, events in enumerate(traces):
        if not isinstance(events, list):
            raise ImportError_(f"{path}: device_traces[{d}] is not a list of events")
        for i, event in enumerate(events):
            if not isinstance(event, dict):
                raise ImportError_(f"{path}: device_traces[{d}] event {i} is not a dict")
            _check_numbers(event, ("addr", "size", "stream"), ("time_us",), f"{path}: device_traces[{d}] event {i}")
            if not isinstance(event.get("action"), str):
                raise ImportError_(f"{path}: device_traces[{d}] event {i}: action is not a string")
    if not isinstance(snapshot["segments"], list):
        raise ImportError_(f"{path}: segments is not a list")
    for s, segment in enumerate(snapshot["segments"]):
        if not isinstance(segment, dict) or not isinstance(segment.get("blocks", []), list):
            raise ImportError_(f"{path}: segments[{s}] is not a segment with a list of blocks")
        _check_numbers(segment, ("device", "address", "total_size", "stream"), (), f"{path}: segments[{s}]")
        for field in ("address", "total_size"):
            if field not in segment:
                raise ImportError_(f"{path}: segments[{s}] has no {field}")
        for b, block in enumerate(segment.get("blocks", [])):
            if not isinstance(block, dict):
                raise ImportError_(f"{path}: segments[{s}].blocks[{b}] is not a dict")
            _check_numbers(block, ("address", "size", "requested_size"), (), f"{path}: segments[{s}].blocks[{b}]")
            if "size" not in block or not isinstance(block.get("state"), str):
                raise ImportError_(f"{path}: segments[{s}].blocks[{b}] needs a size and a state")


def _check_numbers(entry, whole, real, place):
    """Fields that, when present, hold whole numbers that cannot be negative (`whole`) or
    numbers (`real`). A stream handle is a whole number too."""
    for field in (f for f in whole if f in entry):
        value = entry[field]
        if (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ImportError_(f"{place}: {field} {value!r} is not a whole number that cannot be negative")
    for field in (f for f in real if f in entry):
        value = entry[field]
        if (not isinstance(value, (int, float)) or isinstance(value, bool) or value != value):
            raise ImportError_(f"{place}: {field} {value!r} is not a number")


def _field(entry, name, index):
    if name not in entry:
        raise ImportError_(f"device_traces event {index}: missing field '{name}'")
    return entry[name]


def import_snapshot(path, device=None):
    snapshot = load_snapshot(path)
    traces = snapshot["device_traces"]
    if not traces or all(len(t) == 0 for t in traces):
        raise ImportError_(f"{path}: the snapshot has no device trace (was _record_memory_history on?)")
    if device is None:
        device = max(range(len(traces)), key=lambda d: len(traces[d]))
    if device >= len(traces):
        raise ImportError_(f"{path}: no trace for device {device} (the snapshot has {len(traces)})")
    trace = traces[device]
    segments = [s for s in snapshot["segments"] if s.get("device", 0) == device]

    builder = AllocStreamBuilder({
        "kind": "pytorch-snapshot",
        "path": str(path),
        "device_index": device,
        "allocator_settings": snapshot.get("allocator_settings", {}),
    })
    builder.device = {"index": device}

    live_by_addr = {}   # addr -> block id of the block now live there
    initial_by_addr = []  # (addr, id, size, stream) of blocks live before the trace started
    pending = []  # frees of initial-live blocks, emitted once their ids are registered
    reserved_delta = 0
    reserved_walk = []  # (event index, reserved change) to replay after the start is known
    ooms = 0
    start_t = None

    # Pass 1: discover blocks and the order of operations.
    ops = []  # ("alloc", id, size, stream, t) / ("free", id, t)
    for index, entry in enumerate(trace):
        action = _field(entry, "action", index)
        t = entry.get("time_us", 0) or 0
        if start_t is None:
            start_t = t
        if action == "alloc":
            addr = _field(entry, "addr", index)
            if addr in live_by_addr:
                raise ImportError_(f"device_traces event {index}: alloc at {addr:#x}, which is still allocated")
            block_id = builder.new_id()
            live_by_addr[addr] = block_id
            ops.append(("alloc", block_id, _field(entry, "size", index), entry.get("stream", 0), t))
        elif action == "free_completed":
            addr = _field(entry, "addr", index)
            block_id = live_by_addr.pop(addr, None)
            if block_id is None:
                # Allocated before the oldest kept event: it was live at the start.
                block_id = builder.new_id()
                initial_by_addr.append((addr, block_id, _field(entry, "size", index), entry.get("stream", 0)))
            ops.append(("free", block_id, t))
        elif action in SEGMENT_GROWTH:
            reserved_delta += _field(entry, "size", index)
            reserved_walk.append(_field(entry, "size", index))
        elif action in SEGMENT_SHRINK:
            reserved_delta -= _field(entry, "size", index)
            reserved_walk.append(-_field(entry, "size", index))
        elif action == "oom":
            ooms += 1
        # free_requested: the block is reusable only at free_completed; snapshot, user_defined
        # and other markers carry no allocation.

    # Blocks allocated at dump time that the trace never allocated were live all along.
    dump_live_addrs = set()
    mismatched = 0
    for segment in segments:
        for block in _blocks_with_addresses(segment):
            if block["state"] not in ("active_allocated", "active_pending_free"):
                continue
            dump_live_addrs.add(block["address"])
            if block["address"] not in live_by_addr:
                size = block.get("requested_size") or block["size"]
                initial_by_addr.append((block["address"], builder.new_id(), size, segment.get("stream", 0)))
    mismatched = sum(1 for addr in live_by_addr if addr not in dump_live_addrs)
    if mismatched:
        print(f"warning: {mismatched} blocks live at the end of the trace are not allocated in the "
              f"snapshot's segments", file=sys.stderr)

    for addr, block_id, size, stream in sorted(initial_by_addr):
        builder.add_initial_live(block_id, size, stream)
    for op in ops:
        if op[0] == "alloc":
            builder.alloc(op[1], op[2], op[3], op[4] - start_t)
        else:
            builder.free(op[1], op[2] - start_t)

    reserved_end = sum(s["total_size"] for s in segments)
    reserved_start = reserved_end - reserved_delta
    if reserved_start < 0:
        raise ImportError_(f"{path}: segment events release more than the segments hold "
                           f"(reserved at start would be {reserved_start} bytes)")
    reserved, peak_reserved = reserved_start, reserved_start
    for change in reserved_walk:
        reserved += change
        peak_reserved = max(peak_reserved, reserved)
    builder.native_observed = {
        "peak_reserved": peak_reserved,
        "peak_allocated": builder.peak_live_bytes,
        "reserved_at_start": reserved_start,
        "reserved_at_end": reserved_end,
        "segments_at_end": len(segments),
        "ooms": ooms,
    }
    return builder


def _blocks_with_addresses(segment):
    """Snapshot blocks carry an address in recent PyTorch; older ones only sizes in order."""
    addr = segment["address"]
    for block in segment.get("blocks", []):
        if "address" not in block:
            block = dict(block, address=addr)
        addr = block["address"] + block["size"]
        yield block
