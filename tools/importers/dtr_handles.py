"""What both DTR log importers share: reading the log's lines, and the handle rules that say
when a storage dies (../shared/traces/README.md).

A storage lives while any handle names it: a fresh result or a CONSTANT binds its first handle,
a view (ALIAS k >= 0) or a COPY binds another, COPY_FROM moves a handle from one storage to
another, RELEASE drops one. CONSTANT storages never die. The importers differ only in what a
storage carries (a block id, a trace block) and in what they record when one dies.
"""

import json

from alloc_stream import ImportError_


def read_instructions(path):
    """Yields (line number, record) for every non-empty line of the log."""
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


def int_field(record, name, where):
    try:
        return int(record[name])
    except KeyError:
        raise ImportError_(f"{where}: missing field {name}") from None
    except (TypeError, ValueError):
        raise ImportError_(f"{where}: field {name} is not an integer: {record[name]!r}") from None


class Storage:
    """One storage of the log. `payload` is the importer's (None for a storage of 0 bytes)."""
    __slots__ = ("payload", "handles", "constant")

    def __init__(self, payload, constant):
        self.payload = payload
        self.handles = 0
        self.constant = constant


# The instructions that only move handles (Handles.apply).
HANDLE_INSTRUCTIONS = ("COPY", "COPY_FROM", "RELEASE")


class Handles:
    """The live handles of a log. `on_death(storage)` is called when the last handle of a
    storage that is not a CONSTANT and has a payload is dropped."""

    def __init__(self, on_death):
        self._storage = {}  # handle name -> Storage
        self._on_death = on_death
        self.undefined_releases = 0  # releases of handles made before logging started

    def bind(self, name, storage, where):
        if name in self._storage:
            raise ImportError_(f"{where}: handle {name} is defined twice")
        self._storage[name] = storage
        storage.handles += 1

    def storage_of(self, name, where, role):
        if name not in self._storage:
            raise ImportError_(f"{where}: {role} {name} has no live handle")
        return self._storage[name]

    def bind_view(self, name, base, where):
        if base not in self._storage:
            raise ImportError_(f"{where}: {name} is a view of {base}, which has no live handle")
        self.bind(name, self._storage[base], where)

    def _unbind(self, name):
        storage = self._storage.pop(name)
        storage.handles -= 1
        if storage.handles == 0 and not storage.constant and storage.payload is not None:
            self._on_death(storage)

    def apply(self, kind, record, where):
        """One of HANDLE_INSTRUCTIONS."""
        if kind == "COPY":
            self.bind(record.get("DST"), self.storage_of(record.get("SRC"), where, "COPY source"), where)
        elif kind == "COPY_FROM":
            dst, src = record.get("DST"), record.get("SRC")
            target = self.storage_of(src, where, "COPY_FROM source")
            self.storage_of(dst, where, "COPY_FROM destination")
            self._unbind(dst)
            self.bind(dst, target, where)
        elif kind == "RELEASE":
            if record["NAME"] in self._storage:
                self._unbind(record["NAME"])
            else:
                self.undefined_releases += 1
        else:
            raise ValueError(f"not a handle instruction: {kind!r}")
