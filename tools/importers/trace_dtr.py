"""Import a DTR op log (JSON lines; ../shared/traces/README.md) as a DELTA access trace.

Blocks are storages, ops are the log's CALLs and MUTATEs, in log order:
  * reads: the storages of the op's ARGS (every argument, deduplicated);
  * writes: the fresh storage of each result whose ALIAS is -1 (allocated when the op starts),
    and for MUTATE the storages of the arguments listed in MUTATE (changed in place). A result
    that is a view (ALIAS k >= 0) shares the storage of ARGS[k] and writes nothing;
  * start and duration: the op TIME (ns) laid end to end, as the log was taken in blocking mode;
  * phase: forward until ANNOTATE BACKWARD, backward after;
  * a storage is freed when the last handle on it is released (COPY adds a handle, COPY_FROM
    moves one, RELEASE drops one), at the time the release happens;
  * CONSTANT storages (parameters and the input batch; the log does not tell them apart) are
    live before the trace and never freed: category parameter.
Storages of 0 bytes are not blocks; their uses are dropped and counted in the metadata.
The handle rules and the line reader are dtr_handles.py's, shared with dtr_log.py.
"""

import os

import delta_trace as dt
from import_checks import checked
from alloc_stream import ImportError_
from dtr_handles import HANDLE_INSTRUCTIONS, Handles, Storage, count_field, int_field, read_instructions

TITAN_V = dt.GpuInfo(name="Titan V", profile="titanv", memory_bytes=12 << 30)


def _describe(path):
    """Model and batch from the log's file name: <model>-<batch>-<budget>-<date>-<policy>.log."""
    parts = os.path.basename(str(path)).split("-")
    if len(parts) >= 3 and parts[1].isdigit():
        return f"{parts[0]}, batch {parts[1]}", parts[2]
    return os.path.basename(str(path)), None


def import_dtr_trace(path):
    model, budget = _describe(path)
    trace = dt.Trace(source="dtr-log", model=model, gpu=TITAN_V)
    trace.metadata["path"] = str(path)
    if budget is not None:
        trace.metadata["dtr_memory_budget"] = budget

    memory = {}           # name -> bytes (MEMORY lines)
    pending = {}          # result name -> (op, call args, where)
    constants = set()     # CONSTANT names waiting for their MEMORY line
    now_ns = 0
    phase = dt.Phase.FORWARD
    counters = {"skipped_empty_storages": 0, "dropped_empty_uses": 0}

    def new_block(size, name, alloc_ns, category):
        block = dt.Block(id=len(trace.blocks), size=size, alloc_ns=alloc_ns, category=category, label=name)
        trace.blocks.append(block)
        return block

    def died(storage):
        storage.payload.free_ns = now_ns

    handles = Handles(died)

    def add_use(op, storage, access):
        if storage.payload is None:
            counters["dropped_empty_uses"] += 1
            return
        use = (storage.payload.id, access)
        if use not in op.blocks:
            op.blocks.append(use)

    def new_op(record, where, start_ns):
        duration = count_field(record, "TIME", where)
        name = record.get("NAME")
        if not isinstance(name, str):
            raise ImportError_(f"{where}: NAME is missing or not a string")
        op = dt.Op(id=len(trace.ops), name=name, kind=dt.OpKind.OP, start_ns=start_ns, duration_ns=duration,
                   phase=phase)
        trace.ops.append(op)
        return op, duration

    def args_of(record, where):
        args = record.get("ARGS", [])
        if not isinstance(args, list):
            raise ImportError_(f"{where}: ARGS is not a list")
        return args

    for line_number, record in read_instructions(path):
        where = f"{path}:{line_number}"
        kind = record["INSTRUCTION"]
        if kind == "CONSTANT":
            constants.add(record["NAME"])
        elif kind == "MEMORY":
            name = record["NAME"]
            memory[name] = count_field(record, "MEMORY", where)
            if name in constants:
                constants.discard(name)
                size = memory[name]
                block = new_block(size, name, dt.NEVER, dt.Category.PARAMETER) if size > 0 else None
                if block is None:
                    counters["skipped_empty_storages"] += 1
                handles.bind(name, Storage(block, constant=True), where)
        elif kind == "CALL":
            op, duration = new_op(record, where, now_ns)
            args = args_of(record, where)
            if not args and not record.get("RESULT"):
                raise ImportError_(f"{where}: CALL {op.name} has no ARGS and no RESULT: an op must touch a tensor")
            for arg in args:
                add_use(op, handles.storage_of(arg, where, "argument"), dt.Access.READ)
            for result in record.get("RESULT", []):
                pending[result] = (op, args, where)
            now_ns += duration
        elif kind == "MUTATE":
            op, duration = new_op(record, where, now_ns)
            args = args_of(record, where)
            if not args or not record.get("MUTATE"):
                raise ImportError_(f"{where}: MUTATE {op.name} changes nothing (it needs ARGS and MUTATE indices)")
            storages = [handles.storage_of(arg, where, "argument") for arg in args]
            for storage in storages:
                add_use(op, storage, dt.Access.READ)
            for index in record.get("MUTATE", []):
                if not isinstance(index, int) or not 0 <= index < len(args):
                    raise ImportError_(f"{where}: MUTATE index {index!r} but the op has {len(args)} arguments")
                add_use(op, storages[index], dt.Access.WRITE)
            now_ns += duration
        elif kind == "ALIAS":
            name = record["NAME"]
            if name not in pending:
                raise ImportError_(f"{where}: ALIAS of {name}, which no CALL produced")
            op, args, call_where = pending.pop(name)
            alias = int_field(record, "ALIAS", where)
            if alias == -1:
                if name not in memory:
                    raise ImportError_(f"{where}: fresh result {name} has no MEMORY line")
                size = memory[name]
                category = dt.Category.ACTIVATION if op.phase == dt.Phase.FORWARD else dt.Category.UNKNOWN
                block = new_block(size, name, op.start_ns, category) if size > 0 else None
                if block is None:
                    counters["skipped_empty_storages"] += 1
                storage = Storage(block, constant=False)
                handles.bind(name, storage, where)
                add_use(op, storage, dt.Access.WRITE)
            else:
                if not 0 <= alias < len(args):
                    raise ImportError_(f"{where}: ALIAS {alias} of {name} but the call at {call_where} "
                                       f"has {len(args)} arguments")
                handles.bind_view(name, args[alias], where)
        elif kind in HANDLE_INSTRUCTIONS:
            handles.apply(kind, record, where)
        elif kind == "ANNOTATE":
            if record.get("ANNOTATION") == "BACKWARD":
                phase = dt.Phase.BACKWARD
        else:
            raise ImportError_(f"{where}: unknown instruction {kind!r}")

    if pending:
        name = next(iter(pending))
        raise ImportError_(f"{path}: result {name} of the call at {pending[name][2]} has no ALIAS line")
    if not trace.ops:
        raise ImportError_(f"{path}: the log has no CALL or MUTATE: a DTR log records ops, and this one holds none")
    if not trace.blocks:
        raise ImportError_(f"{path}: the log defines no storage of any size: a trace needs blocks")
    trace.iterations.append(dt.Iteration(0, 0, now_ns, 0, len(trace.ops)))
    for key, value in counters.items():
        trace.metadata[key] = str(value)
    return checked(trace, path)
