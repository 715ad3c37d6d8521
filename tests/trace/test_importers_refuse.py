#!/usr/bin/env python3
"""Nothing silent in the importers: each malformed input is refused with a message that names
the line or the place, never imported as an empty or partial trace. Also: an Execution Trace
captured on the CPU is planned as if on the GPU, with a warning that says so and how its
durations were estimated."""

import gzip
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("DELTA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TRACES = os.environ.get("DELTA_TRACES_DIR", os.path.join(SOURCE, "..", "shared", "traces"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "importers"))

import delta_trace as dt  # noqa: E402
from alloc_stream import ImportError_  # noqa: E402
from dtr_log import import_dtr_log  # noqa: E402
from trace_dtr import import_dtr_trace  # noqa: E402
from trace_et import import_et_trace  # noqa: E402
from trace_snapshot import import_snapshot_trace  # noqa: E402

TO_TRACE = os.path.join(SOURCE, "tools", "importers", "to_trace.py")
ET = os.path.join(TRACES, "resnet18_bs128_et.json.gz")

# A DTR log that imports: a parameter, one op making a fresh result, its release.
GOOD_DTR = [
    {"INSTRUCTION": "CONSTANT", "NAME": "w"}, {"INSTRUCTION": "MEMORY", "NAME": "w", "MEMORY": "64"},
    {"INSTRUCTION": "CALL", "ARGS": ["w"], "RESULT": ["a"], "NAME": "f", "TIME": "10"},
    {"INSTRUCTION": "MEMORY", "NAME": "a", "MEMORY": "100"}, {"INSTRUCTION": "ALIAS", "NAME": "a", "ALIAS": "-1"},
    {"INSTRUCTION": "RELEASE", "NAME": "a"},
]


def et_node(id_, name, rf, ins, outs, device="cuda:0"):
    tensor = lambda t: [t, t + 100, 0, 4, 4, device]  # noqa: E731
    return {"id": id_, "name": name, "parent": 1, "rf_id": rf, "tid": 1, "op_schema": f"{name}(Tensor self) -> Tensor",
            "inputs": [tensor(t) for t in ins], "input_types": ["Tensor(float)"] * len(ins),
            "input_shapes": [[4]] * len(ins), "outputs": [tensor(t) for t in outs],
            "output_types": ["Tensor(float)"] * len(outs), "output_shapes": [[4]] * len(outs)}


def et_doc(nodes):
    root = {"id": 1, "name": "[pytorch|profiler|execution_graph|thread]", "parent": 1, "rf_id": 0, "tid": 1,
            "op_schema": "", "inputs": [], "input_types": [], "input_shapes": [], "outputs": [], "output_types": [],
            "output_shapes": []}
    return {"schema": "1.0.1", "pid": 1, "nodes": [root, *nodes]}


class Refusals(unittest.TestCase):
    def path(self, suffix, data, mode="w"):
        f = tempfile.NamedTemporaryFile(mode, suffix=suffix, delete=False)
        f.write(data)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def dtr(self, lines):
        return self.path(".log", "\n".join(json.dumps(line) for line in lines) + "\n")

    def refused_by_both_dtr_importers(self, lines, pattern, importers=(import_dtr_trace, import_dtr_log)):
        path = self.dtr(lines)
        for importer in importers:
            with self.subTest(importer=importer.__name__):
                with self.assertRaisesRegex(ImportError_, pattern):
                    importer(path)

    def test_the_good_log_imports(self):  # the baseline every case below breaks in one place
        trace = import_dtr_trace(self.dtr(GOOD_DTR))
        self.assertEqual((len(trace.ops), len(trace.blocks)), (1, 2))

    def test_dtr_negative_or_non_numeric_sizes_name_the_line(self):
        for bad, pattern in [("-5", r":4: negative MEMORY -5"), ("12abc", r":4: field MEMORY is not an integer: '12abc'"),
                             ("1.5", r":4: field MEMORY is not an integer: '1.5'"), (7.9, r":4: field MEMORY is not an integer: 7.9"),
                             (True, r":4: field MEMORY is not an integer: True")]:
            with self.subTest(memory=bad):
                lines = [dict(line) for line in GOOD_DTR]
                lines[3]["MEMORY"] = bad
                self.refused_by_both_dtr_importers(lines, pattern)

    def test_dtr_negative_time_names_the_line(self):
        lines = [dict(line) for line in GOOD_DTR]
        lines[2]["TIME"] = "-3"
        self.refused_by_both_dtr_importers(lines, r":3: negative TIME -3")

    def test_dtr_release_of_an_unknown_name_is_refused(self):
        self.refused_by_both_dtr_importers(GOOD_DTR + [{"INSTRUCTION": "RELEASE", "NAME": "ghost"}],
                                           r":7: RELEASE of ghost has no live handle")

    def test_dtr_use_of_an_unknown_name_is_refused(self):
        self.refused_by_both_dtr_importers(
            GOOD_DTR + [{"INSTRUCTION": "CALL", "ARGS": ["ghost"], "RESULT": [], "NAME": "g", "TIME": "1"}],
            r":7: argument ghost has no live handle", importers=(import_dtr_trace,))

    def test_dtr_op_with_no_tensors_is_refused(self):
        self.refused_by_both_dtr_importers(
            GOOD_DTR + [{"INSTRUCTION": "CALL", "ARGS": [], "RESULT": [], "NAME": "nothing", "TIME": "1"}],
            r":7: CALL nothing has no ARGS and no RESULT", importers=(import_dtr_trace,))
        self.refused_by_both_dtr_importers(
            GOOD_DTR + [{"INSTRUCTION": "MUTATE", "ARGS": ["w"], "MUTATE": [], "NAME": "add_", "TIME": "1"}],
            r":7: MUTATE add_ changes nothing", importers=(import_dtr_trace,))

    def test_dtr_log_with_no_ops_or_no_blocks_is_refused(self):
        self.refused_by_both_dtr_importers(GOOD_DTR[:2], r"no CALL or MUTATE", importers=(import_dtr_trace,))
        empty = [{"INSTRUCTION": "CONSTANT", "NAME": "w"}, {"INSTRUCTION": "MEMORY", "NAME": "w", "MEMORY": "0"},
                 {"INSTRUCTION": "CALL", "ARGS": ["w"], "RESULT": [], "NAME": "f", "TIME": "1"}]
        self.refused_by_both_dtr_importers(empty, r"no storage of any size")

    def et(self, doc):
        return self.path(".json", json.dumps(doc))

    def test_et_negative_or_non_numeric_sizes_name_the_node(self):
        for field, value in [(3, -4), (4, "4"), (2, 1.5)]:
            with self.subTest(field=field, value=value):
                node = et_node(2, "aten::relu", 1, [1], [2])
                node["inputs"][0][field] = value
                with self.assertRaisesRegex(ImportError_, r"node 2 \(aten::relu\): malformed tensor"):
                    import_et_trace(self.et(et_doc([node])))

    def test_et_tensor_that_is_not_a_tuple_is_refused(self):
        node = et_node(2, "aten::relu", 1, [1], [2])
        node["inputs"][0] = node["inputs"][0][:5]
        with self.assertRaisesRegex(ImportError_, r"node 2 \(aten::relu\): tensor .* is not \[tensor_id"):
            import_et_trace(self.et(et_doc([node])))
        node = et_node(2, "aten::relu", 1, [1], [2])
        node["input_types"].append("Int")
        with self.assertRaisesRegex(ImportError_, r"node 2 \(aten::relu\): 1 argument values for 2 types"):
            import_et_trace(self.et(et_doc([node])))

    def test_et_with_no_operators_or_no_tensors_is_refused(self):
        with self.assertRaisesRegex(ImportError_, r"has no operator"):
            import_et_trace(self.et(et_doc([])))
        with self.assertRaisesRegex(ImportError_, r"no operator touches a tensor on cuda or cpu \(devices seen: meta\)"):
            import_et_trace(self.et(et_doc([et_node(2, "aten::relu", 1, [1], [2], device="meta")])))
        node = et_node(2, "aten::relu", 1, [1], [2])
        node["inputs"][0][3] = node["outputs"][0][3] = 0  # numel 0: no bytes anywhere
        with self.assertRaisesRegex(ImportError_, r"no ops"):
            import_et_trace(self.et(et_doc([node])))

    def test_et_cpu_capture_is_planned_as_on_the_gpu_with_a_warning(self):
        with gzip.open(ET, "rt") as f:
            text = f.read()
        cpu = self.path(".json.gz", gzip.compress(text.replace('"cuda:0"', '"cpu"').encode()), mode="wb")
        out = self.path(".json.gz", b"", mode="wb")
        result = subprocess.run([sys.executable, TO_TRACE, cpu, "--gpu", "h200", "-o", out],
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stderr, r"warning: .*: every tensor is on the CPU; planned as if on the GPU "
                                        r"\(a what-if\), with durations estimated by the cost model for h200")
        trace = dt.read(out)
        gpu = import_et_trace(ET, None, "h200")
        # The GPU capture's ops and blocks, plus those of the few tensors it held on the CPU (the
        # input batch before its copy); all durations estimated.
        self.assertGreaterEqual(len(trace.ops), len(gpu.ops))
        self.assertLessEqual(len(trace.ops), len(gpu.ops) + 5)
        self.assertGreaterEqual(len(trace.blocks), len(gpu.blocks))
        self.assertLessEqual(len(trace.blocks), len(gpu.blocks) + 50)
        self.assertTrue(all(op.duration_estimated for op in trace.ops))
        self.assertIn("what_if", trace.metadata)
        self.assertNotIn("what_if", gpu.metadata)

    def snapshot(self, events, segments=()):
        return self.path(".pickle", pickle.dumps({"device_traces": [events], "segments": list(segments)}), mode="wb")

    def test_snapshot_negative_or_non_numeric_sizes_name_the_event(self):
        for size in (-8, "512", 2.5):
            with self.subTest(size=size):
                path = self.snapshot([{"action": "alloc", "addr": 4096, "size": size, "time_us": 1}])
                with self.assertRaisesRegex(ImportError_, r"device_traces\[0\] event 0: size .* is not a whole number"):
                    import_snapshot_trace(path)
        path = self.snapshot([{"action": "alloc", "addr": 4096, "size": 8, "time_us": "soon"}])
        with self.assertRaisesRegex(ImportError_, r"device_traces\[0\] event 0: time_us 'soon' is not a number"):
            import_snapshot_trace(path)

    def test_snapshot_with_no_blocks_is_refused(self):
        path = self.snapshot([{"action": "segment_alloc", "addr": 0, "size": 2 << 20, "time_us": 1}])
        with self.assertRaisesRegex(ImportError_, r"allocates nothing and no block is live at the dump: no blocks"):
            import_snapshot_trace(path)

    def test_snapshot_with_a_huge_memo_index_reads_in_little_memory(self):
        # A pickle may name any memo index; a damaged one named 0x7ffffff0, and the C unpickler
        # then zeroed a table that large (GiBs). Read in a child held to 1 GiB of address space:
        # the snapshot must import there, and no MemoryError may be taken for a corrupt file.
        events = [{"action": "alloc", "addr": 4096, "size": 8, "time_us": 1},
                  {"action": "free_completed", "addr": 4096, "size": 8, "time_us": 2}]
        data = pickle.dumps({"device_traces": [events], "segments": []}, protocol=2)
        self.assertTrue(data.startswith(b"\x80\x02}q\x00"))  # the top dict memoised as 0, never read back
        path = self.path(".pickle", data.replace(b"}q\x00", b"}r\xf0\xff\xff\x7f", 1), mode="wb")
        child = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
                 f"sys.path.insert(0, {os.path.join(SOURCE, 'tools', 'importers')!r}); "
                 "from trace_snapshot import import_snapshot_trace as i; "
                 f"print(len(i({path!r}).blocks))")
        result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "1"), result.stderr[-2000:])

    def test_snapshot_with_a_byte_array_is_refused_before_its_length_is_allocated(self):
        data = pickle.dumps({"device_traces": [[]], "segments": [], "x": bytearray(b"ab")}, protocol=5)
        at = data.index(pickle.BYTEARRAY8)
        damaged = data[:at + 1] + (1 << 62).to_bytes(8, "little") + data[at + 9:]  # a length no machine has
        with self.assertRaisesRegex(ImportError_, r"holds a byte array; a memory snapshot holds only plain data"):
            import_snapshot_trace(self.path(".pickle", damaged, mode="wb"))

    def test_snapshot_imports_with_blocks_and_no_ops_by_design(self):
        path = self.snapshot([{"action": "alloc", "addr": 4096, "size": 8, "time_us": 1},
                              {"action": "free_completed", "addr": 4096, "size": 8, "time_us": 2}])
        trace = import_snapshot_trace(path)
        self.assertEqual((len(trace.blocks), len(trace.ops)), (1, 0))
        self.assertIn("records allocations, not kernels", trace.metadata["ops"])

    def test_cli_names_the_place_and_writes_nothing(self):
        lines = [dict(line) for line in GOOD_DTR]
        lines[3]["MEMORY"] = "-1"
        out = os.path.join(tempfile.mkdtemp(), "t.json")
        result = subprocess.run([sys.executable, TO_TRACE, self.dtr(lines), "-o", out], capture_output=True, text=True)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"^error: .*\.log:4: negative MEMORY -1")
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main(verbosity=1)
