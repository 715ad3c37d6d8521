"""The DELTA access trace (format "delta-trace", version 1) in Python: dataclasses, reading,
writing and validation with the same rules as the C++ reader (formats/). The format is
documented in docs/trace-format.md; docs/trace.schema.json is its JSON Schema.

Standard library only. Times are integer nanoseconds; -1 (NEVER) is a time outside the trace.
"""

import dataclasses
import enum
import gzip
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List

FORMAT_NAME = "delta-trace"
FORMAT_VERSION = 1
NEVER = -1
MAX_BLOCK_BYTES = 1 << 48
MAX_TIME_NS = 1 << 62
MAX_STREAM = (1 << 53) - 1
MAX_UINT64 = (1 << 64) - 1
MAX_NESTING = 16

BLOCK_COLUMNS = ["id", "size", "address", "stream", "alloc_ns", "free_ns", "category", "label"]
OP_COLUMNS = ["id", "name", "kind", "stream", "start_ns", "duration_ns", "duration_estimated",
              "iteration", "phase", "flops", "bytes", "blocks"]
ITERATION_COLUMNS = ["index", "start_ns", "end_ns", "first_op", "end_op"]


class Access(enum.IntEnum):
    READ = 0
    WRITE = 1
    TOUCH = 2  # direction unknown


class Phase(enum.IntEnum):
    UNKNOWN = 0
    FORWARD = 1
    BACKWARD = 2
    OPTIMIZER = 3


class OpKind(enum.IntEnum):
    KERNEL = 0
    COPY_H2D = 1
    COPY_D2H = 2
    COPY_D2D = 3
    MEMSET = 4
    OP = 5  # a framework op whose kernels are not known one by one


class Category(enum.IntEnum):
    UNKNOWN = 0
    PARAMETER = 1
    INPUT = 2
    ACTIVATION = 3
    GRADIENT = 4
    OPTIMIZER_STATE = 5
    TEMPORARY = 6


class TraceError(Exception):
    """A trace that breaks the format; the message names the place, e.g. 'ops[3].blocks[1]: ...'."""


@dataclass
class GpuInfo:
    name: str = ""
    profile: str = ""
    memory_bytes: int = 0


@dataclass
class Block:
    id: int
    size: int
    address: int = 0
    stream: int = 0
    alloc_ns: int = NEVER
    free_ns: int = NEVER
    category: Category = Category.UNKNOWN
    label: str = ""


@dataclass
class Op:
    id: int
    name: str
    kind: OpKind = OpKind.KERNEL
    stream: int = 0
    start_ns: int = 0
    duration_ns: int = 0
    duration_estimated: bool = False
    iteration: int = 0
    phase: Phase = Phase.UNKNOWN
    blocks: List[tuple] = field(default_factory=list)  # [(block id, Access)]
    flops: float = 0.0
    bytes: int = 0


@dataclass
class Iteration:
    index: int
    start_ns: int
    end_ns: int
    first_op: int
    end_op: int


@dataclass
class Trace:
    source: str
    model: str = ""
    gpu: GpuInfo = field(default_factory=GpuInfo)
    allocator_settings: Dict[str, str] = field(default_factory=dict)
    metadata: Dict[str, str] = field(default_factory=dict)
    blocks: List[Block] = field(default_factory=list)
    ops: List[Op] = field(default_factory=list)
    iterations: List[Iteration] = field(default_factory=list)
    version: int = FORMAT_VERSION


# ---------------------------------------------------------------------------------------------
# Validation: the rules of formats/validate.cpp, in the same order, with the same places.

def _fail(place, problem):
    raise TraceError(f"{place}: {problem}")


def _is_uint(value, limit=MAX_UINT64):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit


def _time_ok(t, never_allowed):
    return isinstance(t, int) and not isinstance(t, bool) and (0 <= t <= MAX_TIME_NS or (never_allowed and t == NEVER))


def validate(trace):
    if trace.version != FORMAT_VERSION:
        _fail("version", f"{trace.version} is not supported (this reader reads version {FORMAT_VERSION})")
    blocks_by_id = {}
    previous_id = None
    for i, b in enumerate(trace.blocks):
        place = f"blocks[{i}]"
        if not _is_uint(b.id):
            _fail(place + ".id", f"must be an integer in 0 .. 2^64-1, not {b.id!r}")
        if previous_id is not None and b.id <= previous_id:
            _fail(place, f"id {b.id} does not follow id {previous_id} (blocks must be sorted by id, ids unique)")
        previous_id = b.id
        if not _is_uint(b.size) or not 1 <= b.size <= MAX_BLOCK_BYTES:
            _fail(place + ".size", f"size {b.size!r} is outside 1 B .. 256 TiB")
        if not _is_uint(b.address) or b.address > MAX_UINT64 - b.size:
            _fail(place + ".address", "address + size overflows 64 bits")
        if not _is_uint(b.stream, MAX_STREAM):
            _fail(place + ".stream", f"stream {b.stream!r} is not an integer in 0 .. 2^53-1")
        if not _time_ok(b.alloc_ns, True):
            _fail(place + ".alloc_ns", f"time {b.alloc_ns!r} is neither -1 nor in 0 .. 2^62")
        if not _time_ok(b.free_ns, True):
            _fail(place + ".free_ns", f"time {b.free_ns!r} is neither -1 nor in 0 .. 2^62")
        if b.alloc_ns != NEVER and b.free_ns != NEVER and b.free_ns < b.alloc_ns:
            _fail(place + ".free_ns", f"block {b.id} freed at {b.free_ns} ns, before its allocation at {b.alloc_ns} ns")
        if b.category not in Category._value2member_map_:
            _fail(place + ".category", f"unknown category code {b.category!r}")
        if not isinstance(b.label, str):
            _fail(place + ".label", "must be a string")
        blocks_by_id[b.id] = b
    _check_address_overlaps(trace)

    op_ids = set()
    previous = None
    for i, op in enumerate(trace.ops):
        place = f"ops[{i}]"
        if not _is_uint(op.id):
            _fail(place + ".id", f"must be an integer in 0 .. 2^64-1, not {op.id!r}")
        if op.id in op_ids:
            _fail(place + ".id", f"op id {op.id} is used twice")
        op_ids.add(op.id)
        if not isinstance(op.name, str):
            _fail(place + ".name", "must be a string")
        if op.kind not in OpKind._value2member_map_:
            _fail(place + ".kind", f"unknown op kind code {op.kind!r}")
        if op.phase not in Phase._value2member_map_:
            _fail(place + ".phase", f"unknown phase code {op.phase!r}")
        if not _is_uint(op.stream, MAX_STREAM):
            _fail(place + ".stream", "stream id above 2^53")
        if not _time_ok(op.start_ns, False):
            _fail(place + ".start_ns", f"time {op.start_ns!r} is outside 0 .. 2^62")
        if not _time_ok(op.duration_ns, False):
            _fail(place + ".duration_ns", f"duration {op.duration_ns!r} is outside 0 .. 2^62")
        if not _is_uint(op.iteration, 0xFFFFFFFF):
            _fail(place + ".iteration", f"{op.iteration!r} is not an integer in 0 .. 2^32-1")
        if not _is_uint(op.bytes):
            _fail(place + ".bytes", f"{op.bytes!r} is not a non-negative integer")
        if isinstance(op.flops, bool) or not isinstance(op.flops, (int, float)) or not math.isfinite(op.flops) \
                or op.flops < 0:
            _fail(place + ".flops", "flops must be finite and not negative")
        if previous is not None and (op.start_ns, op.id) < (previous.start_ns, previous.id):
            _fail(place + ".start_ns", f"op {op.id} starts at {op.start_ns} ns, before the previous op {previous.id} "
                                       f"at {previous.start_ns} ns (ops must be sorted by start_ns, then id)")
        previous = op
        seen = set()
        for u, (block_id, access) in enumerate(op.blocks):
            use_place = f"{place}.blocks[{u}]"
            if access not in Access._value2member_map_:
                _fail(use_place, f"unknown access code {access!r}")
            block = blocks_by_id.get(block_id)
            if block is None:
                _fail(use_place, f"unknown block {block_id}")
            if block.alloc_ns != NEVER and op.start_ns < block.alloc_ns:
                _fail(use_place, f"op starts at {op.start_ns} ns, before block {block_id} is allocated at "
                                 f"{block.alloc_ns} ns")
            key = (block_id, int(access))
            if key in seen:
                _fail(place + ".blocks", f"block {block_id} is listed twice as {Access(access).name.lower()}")
            seen.add(key)

    previous_end = 0
    for i, it in enumerate(trace.iterations):
        place = f"iterations[{i}]"
        if it.index != i:
            _fail(place + ".index", f"index {it.index}, expected {i}")
        if not (_time_ok(it.start_ns, False) and _time_ok(it.end_ns, False) and it.end_ns >= it.start_ns):
            _fail(place, f"times {it.start_ns} .. {it.end_ns} ns are not an interval inside 0 .. 2^62")
        if not (_is_uint(it.first_op) and _is_uint(it.end_op)) or it.first_op > it.end_op \
                or it.end_op > len(trace.ops):
            _fail(place, f"ops {it.first_op} .. {it.end_op} are not a range inside the {len(trace.ops)} ops")
        if it.first_op < previous_end:
            _fail(place + ".first_op", f"iteration starts at op {it.first_op}, inside the previous iteration "
                                       f"(which ends at op {previous_end})")
        previous_end = it.end_op
        for k in range(it.first_op, it.end_op):
            if trace.ops[k].iteration != it.index:
                _fail(f"ops[{k}].iteration", f"op says iteration {trace.ops[k].iteration} but lies in iteration "
                                             f"{it.index}")


def _check_address_overlaps(trace):
    import bisect
    events = []
    for i, b in enumerate(trace.blocks):
        # Address 0: not known. A block freed the instant it is allocated occupies no time.
        if b.address == 0 or (b.free_ns != NEVER and b.free_ns == b.alloc_ns):
            continue
        events.append((-(1 << 70) if b.alloc_ns == NEVER else b.alloc_ns, 1, i))
        if b.free_ns != NEVER:
            events.append((b.free_ns, 0, i))
    events.sort()
    starts = []   # sorted start addresses of live blocks
    owner = {}    # start address -> block index
    for _, kind, i in events:
        b = trace.blocks[i]
        if kind == 0:
            pos = bisect.bisect_left(starts, b.address)
            if pos < len(starts) and starts[pos] == b.address and owner.get(b.address) == i:
                starts.pop(pos)
                del owner[b.address]
            continue
        pos = bisect.bisect_left(starts, b.address)
        for neighbour in (pos, pos - 1):
            if 0 <= neighbour < len(starts):
                other = trace.blocks[owner[starts[neighbour]]]
                if other.address < b.address + b.size and b.address < other.address + other.size:
                    _fail(f"blocks[{i}].address", f"block {b.id} at {b.address} (+{b.size} B) overlaps block "
                                                  f"{other.id} at {other.address} (+{other.size} B) while both are live")
        starts.insert(pos, b.address)
        owner[b.address] = i


# ---------------------------------------------------------------------------------------------
# JSON

def to_json(trace):
    strings, index = [], {}

    def ref(text):
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    blocks = [[b.id, b.size, b.address, b.stream, b.alloc_ns, b.free_ns, int(b.category), ref(b.label)]
              for b in trace.blocks]
    ops = []
    for op in trace.ops:
        uses = []
        for block_id, access in op.blocks:
            uses.append(block_id)
            uses.append(int(access))
        flops = op.flops
        if isinstance(flops, float) and flops.is_integer() and flops < 9.0e15:
            flops = int(flops)
        ops.append([op.id, ref(op.name), int(op.kind), op.stream, op.start_ns, op.duration_ns,
                    1 if op.duration_estimated else 0, op.iteration, int(op.phase), flops, op.bytes, uses])
    return {
        "format": FORMAT_NAME,
        "version": trace.version,
        "source": trace.source,
        "model": trace.model,
        "gpu": dataclasses.asdict(trace.gpu),
        "allocator_settings": dict(trace.allocator_settings),
        "metadata": dict(trace.metadata),
        "strings": strings,
        "block_columns": BLOCK_COLUMNS,
        "blocks": blocks,
        "op_columns": OP_COLUMNS,
        "ops": ops,
        "iteration_columns": ITERATION_COLUMNS,
        "iterations": [[it.index, it.start_ns, it.end_ns, it.first_op, it.end_op] for it in trace.iterations],
    }


def _member(doc, key, place=""):
    if key not in doc:
        _fail(f"{place}.{key}" if place else key, "missing")
    return doc[key]


def _uint(value, place, limit=MAX_UINT64):
    if not _is_uint(value):
        _fail(place, f"must be a non-negative integer, not {value!r}"[:200])
    if value > limit:
        _fail(place, f"{value} is above the limit {limit}")
    return value


def _time(value, place, never_allowed):
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        if never_allowed and value == NEVER:
            return NEVER
        _fail(place, f"{value} is negative" + (" (only -1, never, is allowed)" if never_allowed else ""))
    return _uint(value, place, MAX_TIME_NS)


def _code(value, place, enum_type, what):
    code = _uint(value, place)
    if code >= len(enum_type):
        _fail(place, f"unknown {what} code {code} (0 .. {len(enum_type) - 1})")
    return enum_type(code)


def _array(value, place):
    if not isinstance(value, list):
        _fail(place, f"must be an array, not {type(value).__name__}")
    return value


def _row(value, place, n):
    _array(value, place)
    if len(value) != n:
        _fail(place, f"has {len(value)} columns, expected {n}")
    return value


def _string(value, place):
    if not isinstance(value, str):
        _fail(place, f"must be a string, not {type(value).__name__}")
    return value


def _string_map(value, place):
    if not isinstance(value, dict):
        _fail(place, "must be an object of strings")
    return {k: _string(v, f"{place}.{k}") for k, v in value.items()}


def from_json(doc):
    """A parsed JSON document to a validated Trace. Raises TraceError naming the place."""
    if not isinstance(doc, dict):
        _fail("document", "must be a JSON object")
    name = _string(_member(doc, "format"), "format")
    if name != FORMAT_NAME:
        _fail("format", f'"{name}" is not "{FORMAT_NAME}"')
    version = _member(doc, "version")
    if version != FORMAT_VERSION or isinstance(version, bool):
        _fail("version", f"{json.dumps(version)} is not supported (this reader reads version {FORMAT_VERSION})")
    trace = Trace(source=_string(_member(doc, "source"), "source"))
    if "model" in doc:
        trace.model = _string(doc["model"], "model")
    if "gpu" in doc:
        gpu = doc["gpu"]
        if not isinstance(gpu, dict):
            _fail("gpu", "must be an object")
        trace.gpu = GpuInfo(_string(gpu.get("name", ""), "gpu.name"), _string(gpu.get("profile", ""), "gpu.profile"),
                            _uint(gpu.get("memory_bytes", 0), "gpu.memory_bytes"))
    if "allocator_settings" in doc:
        trace.allocator_settings = _string_map(doc["allocator_settings"], "allocator_settings")
    if "metadata" in doc:
        trace.metadata = _string_map(doc["metadata"], "metadata")
    strings = [_string(s, f"strings[{i}]") for i, s in enumerate(_array(_member(doc, "strings"), "strings"))]
    for key, expected in (("block_columns", BLOCK_COLUMNS), ("op_columns", OP_COLUMNS),
                          ("iteration_columns", ITERATION_COLUMNS)):
        if _member(doc, key) != expected:
            _fail(key, f"must be exactly [{','.join(expected)}] in format version 1, found {json.dumps(doc[key])}")

    def string_ref(value, place):
        i = _uint(value, place)
        if i >= len(strings):
            _fail(place, f"string index {i} is outside the table of {len(strings)} strings")
        return strings[i]

    for i, row in enumerate(_array(_member(doc, "blocks"), "blocks")):
        p = f"blocks[{i}]"
        _row(row, p, len(BLOCK_COLUMNS))
        trace.blocks.append(Block(
            id=_uint(row[0], p + ".id"), size=_uint(row[1], p + ".size"), address=_uint(row[2], p + ".address"),
            stream=_uint(row[3], p + ".stream", MAX_STREAM), alloc_ns=_time(row[4], p + ".alloc_ns", True),
            free_ns=_time(row[5], p + ".free_ns", True), category=_code(row[6], p + ".category", Category, "category"),
            label=string_ref(row[7], p + ".label")))
    for i, row in enumerate(_array(_member(doc, "ops"), "ops")):
        p = f"ops[{i}]"
        _row(row, p, len(OP_COLUMNS))
        flops = row[9]
        if isinstance(flops, bool) or not isinstance(flops, (int, float)):
            _fail(p + ".flops", "must be a number")
        uses = _array(row[11], p + ".blocks")
        if len(uses) % 2:
            _fail(p + ".blocks", f"holds {len(uses)} numbers; block uses are [block, access] pairs")
        pairs = [(_uint(uses[u], f"{p}.blocks[{u // 2}].block"),
                  _code(uses[u + 1], f"{p}.blocks[{u // 2}].access", Access, "access"))
                 for u in range(0, len(uses), 2)]
        trace.ops.append(Op(
            id=_uint(row[0], p + ".id"), name=string_ref(row[1], p + ".name"), kind=_code(row[2], p + ".kind", OpKind, "op kind"),
            stream=_uint(row[3], p + ".stream", MAX_STREAM), start_ns=_time(row[4], p + ".start_ns", False),
            duration_ns=_time(row[5], p + ".duration_ns", False),
            duration_estimated=_uint(row[6], p + ".duration_estimated", 1) == 1,
            iteration=_uint(row[7], p + ".iteration", 0xFFFFFFFF), phase=_code(row[8], p + ".phase", Phase, "phase"),
            flops=flops, bytes=_uint(row[10], p + ".bytes"), blocks=pairs))
    for i, row in enumerate(_array(_member(doc, "iterations"), "iterations")):
        p = f"iterations[{i}]"
        _row(row, p, len(ITERATION_COLUMNS))
        trace.iterations.append(Iteration(_uint(row[0], p + ".index", 0xFFFFFFFF), _time(row[1], p + ".start_ns", False),
                                          _time(row[2], p + ".end_ns", False), _uint(row[3], p + ".first_op"),
                                          _uint(row[4], p + ".end_op")))
    validate(trace)
    return trace


def read(path):
    """Reads a trace file (gzip detected by content). Raises TraceError naming the file and place."""
    path = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        doc = json.loads(data)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise TraceError(f"{path}: cannot read: {e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: invalid JSON: {e}") from None
    except RecursionError:
        raise TraceError(f"{path}: JSON nested too deeply") from None
    try:
        return from_json(doc)
    except TraceError as e:
        raise TraceError(f"{path}: {e}") from None


def write(trace, path):
    """Validates, then writes atomically (temporary file + rename); gzip when path ends in .gz."""
    path = str(path)
    try:
        validate(trace)
    except TraceError as e:
        raise TraceError(f"{path}: refusing to write an invalid trace: {e}") from None
    data = json.dumps(to_json(trace), separators=(",", ":")).encode("utf-8")
    if path.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    return len(data)


def peak_live(trace):
    """(peak live bytes, time in ns of the peak): blocks live before the trace count from the start."""
    events = []
    live = 0
    for b in trace.blocks:
        if b.alloc_ns == NEVER:
            live += b.size
        else:
            events.append((b.alloc_ns, 1, b.size))
        if b.free_ns != NEVER:
            events.append((b.free_ns, 0, b.size))
    events.sort()
    peak, peak_t = live, 0
    for t, kind, size in events:
        live += size if kind else -size
        if live > peak:
            peak, peak_t = live, t
    return peak, peak_t
