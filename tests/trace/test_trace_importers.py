#!/usr/bin/env python3
"""Runs every trace importer on every real trace in ../shared/traces and checks the results;
writes them (.json and .json.gz) to DELTA_TRACE_IMPORTS_DIR for the C++ reader test and the
fuzzer's seed corpus. Also: exact read/write sets and handle rules on hand-made DTR logs, the
1.1.x execution trace layout, the Python reader's errors, and the JSON Schema (when jsonschema
is installed)."""

import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("DELTA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TRACES = os.environ.get("DELTA_TRACES_DIR", os.path.join(SOURCE, "..", "shared", "traces"))
OUT = os.environ.get("DELTA_TRACE_IMPORTS_DIR", tempfile.mkdtemp(prefix="delta_trace_imports_"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "importers"))

import delta_trace as dt  # noqa: E402
from dtr_log import import_dtr_log  # noqa: E402
from trace_dtr import import_dtr_trace  # noqa: E402
from trace_et import import_et_trace  # noqa: E402

TO_TRACE = os.path.join(SOURCE, "tools", "importers", "to_trace.py")
ET = os.path.join(TRACES, "resnet18_bs128_et.json.gz")
KINETO = os.path.join(TRACES, "resnet18_bs128_kineto.json.gz")


def run_cli(*args):
    return subprocess.run([sys.executable, TO_TRACE, *args], capture_output=True, text=True)


def output_name(path):
    return os.path.basename(path).split(".")[0].split("-2020")[0]


class RealTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(OUT, exist_ok=True)
        cls.inputs = sorted(glob.glob(os.path.join(TRACES, "dtr", "*.log"))) + \
            sorted(glob.glob(os.path.join(TRACES, "*.pickle")))
        assert cls.inputs, f"no traces found in {TRACES}"
        cls.written = {}
        jobs = []
        for path, extra in [(p, []) for p in cls.inputs] + [(ET, ["--kineto", KINETO])]:
            for suffix in (".json", ".json.gz"):
                jobs.append((path, extra, os.path.join(OUT, output_name(path) + suffix)))
        # Two at a time: the importers are single-threaded and the test budget is short.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda job: run_cli(job[0], *job[1], "-o", job[2]), jobs))
        for (path, _, target), result in zip(jobs, results):
            assert result.returncode == 0, f"{path}: {result.stderr}"
            cls.written.setdefault(path, []).append(target)
            if target.endswith(".gz"):
                print(result.stdout.strip())

    def test_outputs_read_back_and_agree(self):
        for path, targets in self.written.items():
            plain, packed = (dt.read(t) for t in targets)
            self.assertEqual(plain, packed, path)
            self.assertLess(os.path.getsize(targets[1]), os.path.getsize(targets[0]))

    def test_dtr_matches_the_log(self):
        for path in self.inputs:
            if not path.endswith(".log"):
                continue
            trace = import_dtr_trace(path)
            calls = mutates = total_time = fresh = 0
            with open(path) as f:
                memory = {}
                for line in f:
                    r = json.loads(line)
                    kind = r["INSTRUCTION"]
                    if kind in ("CALL", "MUTATE"):
                        calls += kind == "CALL"
                        mutates += kind == "MUTATE"
                        total_time += int(r["TIME"])
                    elif kind == "MEMORY":
                        memory[r["NAME"]] = int(r["MEMORY"])
                    elif kind == "ALIAS" and int(r["ALIAS"]) == -1 and memory.get(r["NAME"], 0) > 0:
                        fresh += 1
            self.assertEqual(len(trace.ops), calls + mutates, path)
            self.assertEqual(sum(op.duration_ns for op in trace.ops), total_time, path)
            self.assertEqual(trace.iterations[0].end_ns, total_time)
            allocated = [b for b in trace.blocks if b.alloc_ns != dt.NEVER]
            self.assertEqual(len(allocated), fresh, path)
            # Each fresh block is written by exactly the op that starts at its allocation.
            writers = {}
            for op in trace.ops:
                for block, access in op.blocks:
                    if access == dt.Access.WRITE:
                        writers.setdefault(block, []).append(op)
            for block in allocated:
                self.assertEqual(writers[block.id][0].start_ns, block.alloc_ns)
            # The same peak as the alloc-stream importer's.
            self.assertEqual(dt.peak_live(trace)[0], import_dtr_log(path).peak_live_bytes, path)

    def test_execution_trace(self):
        joined = import_et_trace(ET, KINETO)
        alone = import_et_trace(ET)
        self.assertEqual([op.id for op in joined.ops], [op.id for op in alone.ops])
        self.assertTrue(all(op.duration_estimated for op in alone.ops))
        self.assertFalse(any(op.duration_estimated for op in joined.ops))
        phases = {op.phase for op in joined.ops}
        self.assertEqual(phases, {dt.Phase.FORWARD, dt.Phase.BACKWARD, dt.Phase.OPTIMIZER})
        conv = next(op for op in joined.ops if op.name == "aten::cudnn_convolution")
        self.assertGreater(conv.flops, 1e9)
        self.assertEqual(sorted(a for _, a in conv.blocks), [dt.Access.READ, dt.Access.READ, dt.Access.WRITE])
        # The roofline estimate is in the measured ballpark (same-class GPU): within 3x overall.
        measured = sum(op.duration_ns for op in joined.ops)
        estimated = sum(op.duration_ns for op in alone.ops)
        self.assertLess(max(measured, estimated) / min(measured, estimated), 3.0)

    def test_schema(self):
        try:
            import jsonschema
        except ImportError:
            self.skipTest("jsonschema is not installed (scripts/setup-python installs it in .venv)")
        with open(os.path.join(SOURCE, "docs", "trace.schema.json")) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        checked = 0
        for targets in self.written.values():
            # jsonschema is slow on long arrays; the small files cover every field and code.
            if os.path.getsize(targets[0]) > 400_000:
                continue
            with open(targets[0]) as f:
                validator.validate(json.load(f))
            checked += 1
        self.assertGreaterEqual(checked, 4)
        with open(next(iter(self.written.values()))[0]) as f:
            doc = json.load(f)
        doc["blocks"].append([1, -4, 0, 0, -1, -1, 0, 0])
        self.assertFalse(validator.is_valid(doc))


class HandMade(unittest.TestCase):
    def write(self, lines):
        f = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
        f.write("\n".join(json.dumps(line) for line in lines) + "\n")
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_dtr_read_write_sets_are_exact(self):
        path = self.write([
            {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"},
            {"INSTRUCTION": "CONSTANT", "NAME": "w"}, {"INSTRUCTION": "MEMORY", "NAME": "w", "MEMORY": "64"},
            {"INSTRUCTION": "CALL", "ARGS": ["w", "w"], "RESULT": ["a", "v"], "NAME": "f", "TIME": "10"},
            {"INSTRUCTION": "MEMORY", "NAME": "a", "MEMORY": "128"},
            {"INSTRUCTION": "ALIAS", "NAME": "a", "ALIAS": "-1"},
            {"INSTRUCTION": "ALIAS", "NAME": "v", "ALIAS": "1"},
            {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "BACKWARD"},
            {"INSTRUCTION": "MUTATE", "ARGS": ["a", "v"], "MUTATE": [0], "NAME": "add_", "TIME": "5"},
            {"INSTRUCTION": "COPY", "DST": "b", "SRC": "a"},
            {"INSTRUCTION": "RELEASE", "NAME": "a"},
            {"INSTRUCTION": "CALL", "ARGS": ["b"], "RESULT": [], "NAME": "g", "TIME": "7"},
            {"INSTRUCTION": "RELEASE", "NAME": "b"},
        ])
        trace = import_dtr_trace(path)
        w, a = trace.blocks
        self.assertEqual((w.size, w.alloc_ns, w.free_ns, w.category), (64, dt.NEVER, dt.NEVER, dt.Category.PARAMETER))
        self.assertEqual((a.size, a.alloc_ns, a.free_ns, a.category), (128, 0, 22, dt.Category.ACTIVATION))
        f, add, g = trace.ops
        self.assertEqual(f.blocks, [(0, dt.Access.READ), (1, dt.Access.WRITE)])  # the view writes nothing
        self.assertEqual(add.blocks, [(1, dt.Access.READ), (0, dt.Access.READ), (1, dt.Access.WRITE)])
        self.assertEqual(g.blocks, [(1, dt.Access.READ)])
        self.assertEqual([(op.start_ns, op.duration_ns, op.phase) for op in trace.ops],
                         [(0, 10, dt.Phase.FORWARD), (10, 5, dt.Phase.BACKWARD), (15, 7, dt.Phase.BACKWARD)])

    def test_dtr_handle_rules_are_the_same_in_both_importers(self):
        # COPY_FROM moves handle b from storage a to storage c: a dies there (its last handle
        # went), c lives on until b and c are both released; a release of a handle made before
        # the log is counted; the CONSTANT never dies.
        path = self.write([
            {"INSTRUCTION": "CONSTANT", "NAME": "w"}, {"INSTRUCTION": "MEMORY", "NAME": "w", "MEMORY": "64"},
            {"INSTRUCTION": "CALL", "ARGS": ["w"], "RESULT": ["a"], "NAME": "f", "TIME": "10"},
            {"INSTRUCTION": "MEMORY", "NAME": "a", "MEMORY": "100"}, {"INSTRUCTION": "ALIAS", "NAME": "a", "ALIAS": "-1"},
            {"INSTRUCTION": "COPY", "DST": "b", "SRC": "a"},
            {"INSTRUCTION": "RELEASE", "NAME": "a"},
            {"INSTRUCTION": "CALL", "ARGS": ["b"], "RESULT": ["c"], "NAME": "g", "TIME": "5"},
            {"INSTRUCTION": "MEMORY", "NAME": "c", "MEMORY": "200"}, {"INSTRUCTION": "ALIAS", "NAME": "c", "ALIAS": "-1"},
            {"INSTRUCTION": "COPY_FROM", "DST": "b", "SRC": "c"},
            {"INSTRUCTION": "CALL", "ARGS": ["c"], "RESULT": [], "NAME": "h", "TIME": "7"},
            {"INSTRUCTION": "RELEASE", "NAME": "c"},
            {"INSTRUCTION": "CALL", "ARGS": ["b"], "RESULT": [], "NAME": "k", "TIME": "3"},
            {"INSTRUCTION": "RELEASE", "NAME": "b"},
            {"INSTRUCTION": "RELEASE", "NAME": "w"},
        ])
        trace = import_dtr_trace(path)
        self.assertEqual([(b.label, b.alloc_ns, b.free_ns) for b in trace.blocks],
                         [("w", dt.NEVER, dt.NEVER), ("a", 0, 15), ("c", 10, 25)])
        stream = import_dtr_log(path)
        self.assertEqual(stream.initial_live, [{"id": 0, "size": 64, "stream": 0}])
        self.assertEqual([(e["op"], e["id"], e["t"]) for e in stream.events],
                         [("alloc", 1, 0.0), ("alloc", 2, 0.01), ("free", 1, 0.015), ("free", 2, 0.025)])
        for log, message in [([{"INSTRUCTION": "COPY_FROM", "DST": "x", "SRC": "w"}], "COPY_FROM source w"),
                             ([{"INSTRUCTION": "COPY", "DST": "x", "SRC": "y"}], "COPY source y")]:
            bad = self.write(log)
            for importer in (import_dtr_trace, import_dtr_log):
                with self.assertRaisesRegex(Exception, f":1: {message} has no live handle"):
                    importer(bad)

    def test_dtr_errors_name_the_line(self):
        path = self.write([{"INSTRUCTION": "CALL", "ARGS": ["nope"], "RESULT": [], "NAME": "f", "TIME": "1"}])
        with self.assertRaisesRegex(Exception, r":1: argument nope has no live handle"):
            import_dtr_trace(path)

    def test_execution_trace_schema_1_1(self):
        def node(id_, name, parent, rf, schema, ins, outs, tid=1):
            attrs = [{"name": "rf_id", "type": "uint64", "value": rf}, {"name": "tid", "type": "uint64", "value": tid},
                     {"name": "op_schema", "type": "string", "value": schema}]
            return {"id": id_, "name": name, "ctrl_deps": parent, "attrs": attrs,
                    "inputs": {"values": ins, "shapes": [[4]] * len(ins), "types": ["Tensor(float)"] * len(ins)},
                    "outputs": {"values": outs, "shapes": [[4]] * len(outs), "types": ["Tensor(float)"] * len(outs)}}
        x, y, z = [1, 10, 0, 4, 4, "cuda:0"], [2, 11, 0, 4, 4, "cuda:0"], [3, 10, 0, 4, 4, "cuda:0"]
        doc = {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "nodes": [
            {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "attrs": [],
             "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []}},
            node(2, "aten::relu", 1, 1, "aten::relu(Tensor self) -> Tensor", [x], [y]),
            node(3, "aten::relu_", 1, 2, "aten::relu_(Tensor(a!) self) -> Tensor(a!)", [y], [y]),
            node(4, "aten::view", 1, 3, "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", [x], [z]),
        ]}
        path = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False).name
        self.addCleanup(os.unlink, path)
        with open(path, "w") as f:
            json.dump(doc, f)
        trace = import_et_trace(path)
        dt.validate(trace)
        self.assertEqual([op.blocks for op in trace.ops],
                         [[(0, dt.Access.READ), (1, dt.Access.WRITE)],
                          [(1, dt.Access.READ), (1, dt.Access.WRITE)],
                          [(0, dt.Access.READ)]])
        self.assertEqual(trace.blocks[0].alloc_ns, dt.NEVER)
        self.assertEqual(trace.blocks[1].alloc_ns, 0)

    def test_cli_errors(self):
        result = run_cli("/nonexistent.log", "-o", os.path.join(OUT, "x.json"))
        self.assertEqual(result.returncode, 1)
        self.assertIn("/nonexistent.log: no such file", result.stderr)
        result = run_cli(ET, "--gpu", "b200", "-o", os.path.join(OUT, "x.json"))
        self.assertIn("unknown GPU profile 'b200'", result.stderr)

    def test_python_reader_errors(self):
        doc = dt.to_json(dt.Trace(source="x", blocks=[dt.Block(id=1, size=8)],
                                  ops=[dt.Op(id=0, name="k", blocks=[(1, dt.Access.READ)])]))
        doc["ops"][0][11] = [77, 0]
        with self.assertRaisesRegex(dt.TraceError, r"^ops\[0\]\.blocks\[0\]: unknown block 77$"):
            dt.from_json(doc)
        doc["ops"][0][11] = [1, 0]
        doc["blocks"][0][5] = -3
        with self.assertRaisesRegex(dt.TraceError, r"^blocks\[0\]\.free_ns: -3 is negative"):
            dt.from_json(doc)


if __name__ == "__main__":
    unittest.main(verbosity=2)
