"""Import a DTR op log (JSON lines, see ../shared/traces/README.md) as an alloc stream.

Storage lifetimes:
  * a CALL result whose ALIAS is -1 gets fresh storage of MEMORY bytes, allocated when the
    call starts; ALIAS k >= 0 makes the result a view on the storage of the call's ARGS[k];
  * COPY adds a handle to the same storage; COPY_FROM moves a handle to another storage;
  * RELEASE drops a handle; the storage is freed when no handle of any tensor on it remains;
  * CONSTANT storages (parameters, inputs) exist before the step and for the whole run: they
    are initial_live blocks and never freed;
  * MUTATE works in place and allocates nothing.
Time is the cumulative op TIME (ns) converted to microseconds. Storages of 0 bytes are not
allocations and are skipped; storages still live at the end of the log stay live.
"""

import json

from alloc_stream import AllocStreamBuilder, ImportError_


class _Storage:
    __slots__ = ("block_id", "size", "handles", "constant")

    def __init__(self, block_id, size, constant):
        self.block_id = block_id
        self.size = size
        self.handles = 0
        self.constant = constant


def _read_instructions(path):
    with open(path, "r", encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ImportError_(f"{path}:{line_number}: not JSON ({e.msg})") from None
            if not isinstance(record, dict) or "INSTRUCTION" not in record:
                raise ImportError_(f"{path}:{line_number}: no INSTRUCTION field")
            yield line_number, record


def _int_field(record, name, where):
    try:
        return int(record[name])
    except KeyError:
        raise ImportError_(f"{where}: missing field {name}") from None
    except (TypeError, ValueError):
        raise ImportError_(f"{where}: field {name} is not an integer: {record[name]!r}") from None


def import_dtr_log(path):
    builder = AllocStreamBuilder({"kind": "dtr-log", "path": str(path)})
    handle_storage = {}   # handle name -> _Storage
    memory = {}           # name -> bytes, from MEMORY lines
    pending_results = {}  # result name -> (call args, call start time, where)
    pending_constants = set()
    now_ns = 0
    skipped_empty = 0
    undefined_releases = 0

    def bind(name, storage, where):
        if name in handle_storage:
            raise ImportError_(f"{where}: handle {name} is defined twice")
        handle_storage[name] = storage
        storage.handles += 1

    def unbind(name):
        storage = handle_storage.pop(name)
        storage.handles -= 1
        if storage.handles == 0 and not storage.constant and storage.block_id is not None:
            builder.free(storage.block_id, now_ns / 1000.0)

    for line_number, record in _read_instructions(path):
        where = f"{path}:{line_number}"
        kind = record["INSTRUCTION"]
        if kind == "CONSTANT":
            pending_constants.add(record["NAME"])
        elif kind == "MEMORY":
            name = record["NAME"]
            memory[name] = _int_field(record, "MEMORY", where)
            if name in pending_constants:
                pending_constants.discard(name)
                size = memory[name]
                storage = _Storage(None, size, constant=True)
                if size > 0:
                    storage.block_id = builder.new_id()
                    builder.add_initial_live(storage.block_id, size)
                else:
                    skipped_empty += 1
                bind(name, storage, where)
        elif kind == "CALL":
            start_ns = now_ns
            now_ns += _int_field(record, "TIME", where)
            for result in record.get("RESULT", []):
                pending_results[result] = (record.get("ARGS", []), start_ns, where)
        elif kind == "ALIAS":
            name = record["NAME"]
            if name not in pending_results:
                raise ImportError_(f"{where}: ALIAS of {name}, which no CALL produced")
            args, start_ns, call_where = pending_results.pop(name)
            alias = _int_field(record, "ALIAS", where)
            if alias == -1:
                if name not in memory:
                    raise ImportError_(f"{where}: fresh result {name} has no MEMORY line")
                size = memory[name]
                storage = _Storage(None, size, constant=False)
                if size > 0:
                    storage.block_id = builder.new_id()
                    builder.alloc(storage.block_id, size, 0, start_ns / 1000.0)
                else:
                    skipped_empty += 1
                bind(name, storage, where)
            else:
                if alias < 0 or alias >= len(args):
                    raise ImportError_(f"{where}: ALIAS {alias} of {name} but the call at {call_where} "
                                       f"has {len(args)} arguments")
                base = args[alias]
                if base not in handle_storage:
                    raise ImportError_(f"{where}: {name} is a view of {base}, which has no live handle")
                bind(name, handle_storage[base], where)
        elif kind == "MUTATE":
            now_ns += _int_field(record, "TIME", where)
        elif kind == "COPY":
            src = record.get("SRC")
            if src not in handle_storage:
                raise ImportError_(f"{where}: COPY from {src}, which has no live handle")
            bind(record.get("DST"), handle_storage[src], where)
        elif kind == "COPY_FROM":
            dst, src = record.get("DST"), record.get("SRC")
            if src not in handle_storage or dst not in handle_storage:
                raise ImportError_(f"{where}: COPY_FROM between undefined handles {dst}, {src}")
            target = handle_storage[src]
            unbind(dst)
            bind(dst, target, where)
        elif kind == "RELEASE":
            name = record["NAME"]
            if name in handle_storage:
                unbind(name)
            else:
                undefined_releases += 1  # releases of handles made before logging started
        elif kind == "ANNOTATE":
            pass
        else:
            raise ImportError_(f"{where}: unknown instruction {kind!r}")

    if pending_results:
        name = next(iter(pending_results))
        raise ImportError_(f"{path}: result {name} of the call at {pending_results[name][2]} has no ALIAS line")
    builder.source["skipped_empty_storages"] = skipped_empty
    builder.source["undefined_releases"] = undefined_releases
    return builder
