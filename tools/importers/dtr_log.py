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

from alloc_stream import AllocStreamBuilder, ImportError_
from dtr_handles import HANDLE_INSTRUCTIONS, Handles, Storage, count_field, int_field, read_instructions


def import_dtr_log(path):
    builder = AllocStreamBuilder({"kind": "dtr-log", "path": str(path)})
    memory = {}           # name -> bytes, from MEMORY lines
    pending_results = {}  # result name -> (call args, call start time, where)
    pending_constants = set()
    now_ns = 0
    skipped_empty = 0
    handles = Handles(lambda storage: builder.free(storage.payload, now_ns / 1000.0))

    for line_number, record in read_instructions(path):
        where = f"{path}:{line_number}"
        kind = record["INSTRUCTION"]
        if kind == "CONSTANT":
            pending_constants.add(record["NAME"])
        elif kind == "MEMORY":
            name = record["NAME"]
            memory[name] = count_field(record, "MEMORY", where)
            if name in pending_constants:
                pending_constants.discard(name)
                size = memory[name]
                storage = Storage(None, constant=True)
                if size > 0:
                    storage.payload = builder.new_id()
                    builder.add_initial_live(storage.payload, size)
                else:
                    skipped_empty += 1
                handles.bind(name, storage, where)
        elif kind == "CALL":
            start_ns = now_ns
            now_ns += count_field(record, "TIME", where)
            for result in record.get("RESULT", []):
                pending_results[result] = (record.get("ARGS", []), start_ns, where)
        elif kind == "ALIAS":
            name = record["NAME"]
            if name not in pending_results:
                raise ImportError_(f"{where}: ALIAS of {name}, which no CALL produced")
            args, start_ns, call_where = pending_results.pop(name)
            alias = int_field(record, "ALIAS", where)
            if alias == -1:
                if name not in memory:
                    raise ImportError_(f"{where}: fresh result {name} has no MEMORY line")
                size = memory[name]
                storage = Storage(None, constant=False)
                if size > 0:
                    storage.payload = builder.new_id()
                    builder.alloc(storage.payload, size, 0, start_ns / 1000.0)
                else:
                    skipped_empty += 1
                handles.bind(name, storage, where)
            else:
                if alias < 0 or alias >= len(args):
                    raise ImportError_(f"{where}: ALIAS {alias} of {name} but the call at {call_where} "
                                       f"has {len(args)} arguments")
                handles.bind_view(name, args[alias], where)
        elif kind == "MUTATE":
            now_ns += count_field(record, "TIME", where)
        elif kind in HANDLE_INSTRUCTIONS:
            handles.apply(kind, record, where)
        elif kind == "ANNOTATE":
            pass
        else:
            raise ImportError_(f"{where}: unknown instruction {kind!r}")

    if pending_results:
        name = next(iter(pending_results))
        raise ImportError_(f"{path}: result {name} of the call at {pending_results[name][2]} has no ALIAS line")
    if not builder.initial_live and not builder.events:
        raise ImportError_(f"{path}: the log defines no storage of any size: nothing to replay")
    builder.source["skipped_empty_storages"] = skipped_empty
    return builder
