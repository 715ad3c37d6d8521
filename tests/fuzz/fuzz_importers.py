#!/usr/bin/env python3
"""Mutation fuzzer for the Python importers (tools/importers): the DTR log (both importers), the
PyTorch Execution Trace and the memory snapshot. libFuzzer reaches only the C++ readers, so this
one mutates small valid inputs in Python: at the structure level (a field deleted, a number
made negative, huge, fractional or a string, a list emptied, a name changed, a line dropped or
repeated) and at the byte level (bytes flipped, the file cut short).

Each importer must answer with a trace that passes the trace format's checks, or refuse with
ImportError_ (or TraceError); anything else, or an accepted trace with no blocks, is a bug: the
input is written to the output folder and the run fails.

    fuzz_importers.py SECONDS_PER_IMPORTER OUT_DIR [SEED]
"""

import copy
import json
import os
import pickle
import random
import resource
import sys
import tempfile
import time
import traceback

SOURCE = os.environ.get("DELTA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tools", "importers"))

import delta_trace as dt  # noqa: E402
from alloc_stream import ImportError_  # noqa: E402
from dtr_log import import_dtr_log  # noqa: E402
from trace_dtr import import_dtr_trace  # noqa: E402
from trace_et import import_et_trace  # noqa: E402
from trace_snapshot import import_snapshot_trace  # noqa: E402

EXPECTED = (ImportError_, dt.TraceError)

DTR_SEED = [
    {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"},
    {"INSTRUCTION": "CONSTANT", "NAME": "w"}, {"INSTRUCTION": "MEMORY", "NAME": "w", "MEMORY": "4096"},
    {"INSTRUCTION": "COPY", "DST": "w2", "SRC": "w"},
    {"INSTRUCTION": "CALL", "ARGS": ["w2"], "RESULT": ["y", "v"], "NAME": "conv", "TIME": "1000"},
    {"INSTRUCTION": "MEMORY", "NAME": "y", "MEMORY": "8192"}, {"INSTRUCTION": "ALIAS", "NAME": "y", "ALIAS": "-1"},
    {"INSTRUCTION": "ALIAS", "NAME": "v", "ALIAS": "0"},
    {"INSTRUCTION": "MUTATE", "ARGS": ["y", "w2"], "MUTATE": [0], "NAME": "add_", "TIME": "200"},
    {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "BACKWARD"},
    {"INSTRUCTION": "CALL", "ARGS": ["y"], "RESULT": ["g"], "NAME": "relu_backward", "TIME": "300"},
    {"INSTRUCTION": "MEMORY", "NAME": "g", "MEMORY": "8192"}, {"INSTRUCTION": "ALIAS", "NAME": "g", "ALIAS": "-1"},
    {"INSTRUCTION": "COPY_FROM", "DST": "v", "SRC": "g"},
    {"INSTRUCTION": "RELEASE", "NAME": "y"}, {"INSTRUCTION": "RELEASE", "NAME": "g"},
]


def _et_node(id_, name, rf, ins, outs, schema=None):
    tensor = lambda t: [t, t + 100, 0, 16, 4, "cuda:0"]  # noqa: E731
    return {"id": id_, "name": name, "parent": 1, "rf_id": rf, "tid": 1,
            "op_schema": schema or f"{name}(Tensor self) -> Tensor",
            "inputs": [tensor(t) for t in ins] + [[2, 2]], "input_types": ["Tensor(float)"] * len(ins) + ["GenericList[Int,Int]"],
            "input_shapes": [[16]] * len(ins) + [[[], []]], "outputs": [tensor(t) for t in outs],
            "output_types": ["Tensor(float)"] * len(outs), "output_shapes": [[16]] * len(outs)}


ET_SEED = {"schema": "1.0.1", "pid": 1, "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_graph|thread]", "parent": 1, "rf_id": 0, "tid": 1, "op_schema": "",
     "inputs": [], "input_types": [], "input_shapes": [], "outputs": [], "output_types": [], "output_shapes": []},
    _et_node(2, "aten::mm", 1, [1, 2], [3]),
    _et_node(3, "aten::relu_", 2, [3], [3], "aten::relu_(Tensor(a!) self) -> Tensor(a!)"),
    _et_node(4, "aten::view", 3, [3], [5], "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)"),
    _et_node(5, "aten::add", 4, [5, 1], [6]),
]}

SNAPSHOT_SEED = {
    "device_traces": [[
        {"action": "segment_alloc", "addr": 0, "size": 2 << 20, "stream": 0, "time_us": 1},
        {"action": "alloc", "addr": 0, "size": 512, "stream": 0, "time_us": 2},
        {"action": "alloc", "addr": 512, "size": 1024, "stream": 0, "time_us": 3},
        {"action": "free_requested", "addr": 0, "size": 512, "stream": 0, "time_us": 4},
        {"action": "free_completed", "addr": 0, "size": 512, "stream": 0, "time_us": 5},
        {"action": "free_completed", "addr": 4096, "size": 256, "stream": 0, "time_us": 6},
    ]],
    "segments": [{"device": 0, "address": 0, "total_size": 2 << 20, "stream": 0, "blocks": [
        {"address": 512, "size": 1024, "requested_size": 1000, "state": "active_allocated"},
        {"address": 8192, "size": 2048, "requested_size": 2048, "state": "active_allocated"}]}],
}

ODD_VALUES = [-1, -(1 << 40), 0, 1.5, float("nan"), 1 << 70, "12abc", "-7", "", None, True, [], {}, "x"]


def mutate_structure(doc, rng):
    """One random change somewhere in a JSON-like document (in place)."""
    containers = []

    def walk(node):
        if isinstance(node, dict):
            containers.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            containers.append(node)
            for value in node:
                walk(value)

    walk(doc)
    target = rng.choice(containers)
    if not target:
        return
    key = rng.choice(list(target.keys())) if isinstance(target, dict) else rng.randrange(len(target))
    choice = rng.random()
    if choice < 0.2 and isinstance(target, dict):
        del target[key]
    elif choice < 0.2:
        target.pop(key)
    elif choice < 0.6:
        target[key] = rng.choice(ODD_VALUES)
    elif choice < 0.75 and isinstance(target[key], str):
        target[key] = rng.choice(["w", "y", "g", "ghost", "v", "w2", target[key] + "_"])
    elif choice < 0.9 and isinstance(target, list):
        target.insert(rng.randrange(len(target) + 1), copy.deepcopy(target[key]))
    elif isinstance(target[key], (int, float)) and not isinstance(target[key], bool):
        target[key] = -target[key] if rng.random() < 0.5 else target[key] * 3


def mutate_bytes(data, rng):
    data = bytearray(data)
    if data and rng.random() < 0.3:
        del data[rng.randrange(len(data)):]
    for _ in range(rng.randint(1, 4)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def dtr_input(rng):
    lines = copy.deepcopy(DTR_SEED)
    for _ in range(rng.randint(1, 3)):
        mutate_structure(lines, rng)
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    return mutate_bytes(text.encode(), rng) if rng.random() < 0.2 else text.encode()


def et_input(rng):
    doc = copy.deepcopy(ET_SEED)
    for _ in range(rng.randint(1, 3)):
        mutate_structure(doc, rng)
    data = json.dumps(doc).encode()
    return mutate_bytes(data, rng) if rng.random() < 0.2 else data


def snapshot_input(rng):
    doc = copy.deepcopy(SNAPSHOT_SEED)
    for _ in range(rng.randint(1, 3)):
        mutate_structure(doc, rng)
    data = pickle.dumps(doc)
    return mutate_bytes(data, rng) if rng.random() < 0.2 else data


TARGETS = [
    ("dtr_trace", ".log", dtr_input, import_dtr_trace),
    ("dtr_alloc_stream", ".log", dtr_input, import_dtr_log),
    ("execution_trace", ".json", et_input, import_et_trace),
    ("memory_snapshot", ".pickle", snapshot_input, import_snapshot_trace),
]


def check(importer, path):
    """(accepted, problem): problem is None when the importer behaved, else what went wrong."""
    try:
        result = importer(path)
    except EXPECTED:
        return False, None
    except Exception:  # noqa: BLE001 - every other exception is what the fuzzer looks for
        return False, traceback.format_exc()
    if isinstance(result, dt.Trace):
        try:
            dt.validate(result)
        except dt.TraceError as e:
            return True, f"accepted an invalid trace: {e}"
        if not result.blocks:
            return True, "accepted a trace with no blocks"
    return True, None


# The address space each importer may use here. A damaged file must not make an importer take
# memory out of proportion to its size (a 435-byte snapshot once made the C unpickler touch
# 3.8 GiB, and the kernel killed the run beside other tests): past this the allocation fails,
# and the MemoryError, which no importer takes for a corrupt file, is a finding.
ADDRESS_SPACE_LIMIT = 2 << 30


def main():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, resource.getrlimit(resource.RLIMIT_AS)[1]))
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5
    out = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="fuzz_importers_")
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int(time.time())
    os.makedirs(out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="fuzz_importers_scratch_")
    failures = 0
    devnull = open(os.devnull, "w")
    for name, suffix, make, importer in TARGETS:
        rng = random.Random(f"{seed}-{name}")
        path = os.path.join(scratch, "input" + suffix)
        runs = accepted = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            data = make(rng)
            with open(path, "wb") as f:
                f.write(data)
            stderr, sys.stderr = sys.stderr, devnull  # the importers' warnings, by design
            try:
                ok, problem = check(importer, path)
            finally:
                sys.stderr = stderr
            runs += 1
            accepted += ok
            if problem is not None:
                failures += 1
                crash = os.path.join(out, f"crash-{name}-{runs}{suffix}")
                with open(crash, "wb") as f:
                    f.write(data)
                print(f"fuzz_importers: {name}: {problem.strip()}\n  input: {crash}", file=sys.stderr)
                break
        # Both answers must come up, or the mutations are too timid (or too wild) to test much.
        print(f"fuzz_importers: {name}: {runs} inputs in {seconds:g} s, {accepted} accepted (seed {seed})")
        if runs > 50 and not 0 < accepted < runs:
            print(f"fuzz_importers: {name}: every input had the same answer", file=sys.stderr)
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
