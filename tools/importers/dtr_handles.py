"""What both DTR log importers share: reading the log's lines, and the handle rules that say
when a storage dies (../shared/traces/README.md).

A storage lives while any handle names it: a fresh result or a CONSTANT binds its first handle,
a view (ALIAS k >= 0) or a COPY binds another, COPY_FROM moves a handle from one storage to
another, RELEASE drops one. CONSTANT storages never die. The importers differ only in what a
storage carries (a block id, a trace block) and in what they record when one dies.
"""

import json
import re

from alloc_stream import ImportError_


def read_instructions(path):
    """Yields (line number, record) for every non-empty line of the log."""
    with open(path, "rb") as f:
        for line_number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise ImportError_(f"{path}:{line_number}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ImportError_(f"{path}:{line_number}: not JSON ({e.msg})") from None
            if not isinstance(record, dict) or "INSTRUCTION" not in record:
                raise ImportError_(f"{path}:{line_number}: no INSTRUCTION field")
            _check_fields(record, f"{path}:{line_number}")
            yield line_number, record


# The fields each instruction needs, by type: names are strings, ARGS and RESULT lists of names.
_NAME_FIELDS = {"CONSTANT": ("NAME",), "MEMORY": ("NAME",), "CALL": ("NAME",), "MUTATE": ("NAME",),
                "ALIAS": ("NAME",), "COPY": ("DST", "SRC"), "COPY_FROM": ("DST", "SRC"), "RELEASE": ("NAME",),
                "ANNOTATE": ("ANNOTATION",)}
_NAME_LIST_FIELDS = {"CALL": ("ARGS", "RESULT"), "MUTATE": ("ARGS",)}


def _check_fields(record, where):
    kind = record["INSTRUCTION"]
    if not isinstance(kind, str):
        raise ImportError_(f"{where}: INSTRUCTION is not a string: {kind!r}")
    for field in _NAME_FIELDS.get(kind, ()):
        if not isinstance(record.get(field), str):
            raise ImportError_(f"{where}: {kind} needs {field} as a string, not {record.get(field)!r}")
    for field in _NAME_LIST_FIELDS.get(kind, ()):
        value = record.get(field, [])
        if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
            raise ImportError_(f"{where}: {kind}'s {field} is not a list of names: {value!r}")
    if kind == "MUTATE" and not isinstance(record.get("MUTATE"), list):
        raise ImportError_(f"{where}: MUTATE needs its MUTATE list of argument indices")


_INTEGER_TEXT = re.compile(r"-?[0-9]+")


def int_field(record, name, where):
    """DTR writes integers as strings ("TIME":"733881"); JSON integers are taken too. Anything
    else (1.5, "12abc", true, " 7") is refused: int() would round or strip it in silence."""
    if name not in record:
        raise ImportError_(f"{where}: missing field {name}")
    value = record[name]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        return int(value)
    raise ImportError_(f"{where}: field {name} is not an integer: {value!r}")


def count_field(record, name, where):
    """A size or a time: an integer that cannot be negative."""
    value = int_field(record, name, where)
    if value < 0:
        raise ImportError_(f"{where}: negative {name} {value}")
    return value


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
            # A release of a name no instruction made means the log is cut or corrupt: the
            # storage it would free is unknown, so every later lifetime would be wrong.
            self.storage_of(record.get("NAME"), where, "RELEASE of")
            self._unbind(record["NAME"])
        else:
            raise ValueError(f"not a handle instruction: {kind!r}")
