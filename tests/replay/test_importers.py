#!/usr/bin/env python3
"""Importers: every sample trace becomes a valid alloc stream; bad input fails clearly.

Writes the streams to $DELTA_REPLAY_STREAMS_DIR, where test_replay_traces reads them.
Environment: DELTA_SOURCE_DIR, DELTA_TRACES_DIR, DELTA_REPLAY_STREAMS_DIR.
"""

import glob
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("DELTA_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TRACES = os.environ.get("DELTA_TRACES_DIR", os.path.join(SOURCE, "..", "shared", "traces"))
STREAMS = os.environ.get("DELTA_REPLAY_STREAMS_DIR", tempfile.mkdtemp())
CLI = os.path.join(SOURCE, "tools", "importers", "to_alloc_stream.py")
SNAPSHOT = os.path.join(TRACES, "transformerlm2.7b_bs4_ctx128_fullstep_snapshot.pickle")

sys.path.insert(0, os.path.join(SOURCE, "tools", "importers"))


def run_cli(*args):
    return subprocess.run([sys.executable, CLI, *args], capture_output=True, text=True, timeout=120)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def validate(testcase, doc):
    """An independent check of the format rules; returns the recomputed peak of live bytes."""
    testcase.assertEqual(doc["format"], "delta-alloc-stream")
    testcase.assertEqual(doc["version"], 1)
    live = {}
    for block in doc["initial_live"]:
        testcase.assertNotIn(block["id"], live)
        testcase.assertGreater(block["size"], 0)
        live[block["id"]] = block["size"]
    live_bytes = peak = sum(live.values())
    last_t = float("-inf")
    for index, event in enumerate(doc["events"]):
        testcase.assertGreaterEqual(event["t"], last_t, f"events[{index}]")
        last_t = event["t"]
        if event["op"] == "alloc":
            testcase.assertNotIn(event["id"], live, f"events[{index}] allocates a live id")
            testcase.assertTrue(0 < event["size"] < 1 << 44)
            live[event["id"]] = event["size"]
            live_bytes += event["size"]
            peak = max(peak, live_bytes)
        else:
            testcase.assertEqual(event["op"], "free")
            testcase.assertIn(event["id"], live, f"events[{index}] frees a dead id")
            live_bytes -= live.pop(event["id"])
    testcase.assertEqual(doc["summary"]["peak_live_bytes"], peak)
    return peak, live_bytes


class SampleTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(STREAMS, exist_ok=True)

    def test_every_dtr_log(self):
        logs = sorted(glob.glob(os.path.join(TRACES, "dtr", "*.log")))
        self.assertEqual(len(logs), 5)
        for log in logs:
            with self.subTest(log=os.path.basename(log)):
                out = os.path.join(STREAMS, os.path.basename(log).split("-")[0] + ".json.gz")
                result = run_cli(log, "-o", out)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("(dtr)", result.stdout)
                self.assertEqual(result.stdout.count("\n"), 1)
                doc = load(out)
                peak, _ = validate(self, doc)
                self.assertGreater(peak, 100 << 20)
                with open(log) as f:
                    constants = sum(1 for line in f if '"CONSTANT"' in line)
                # Every constant is an initial live block, unless it holds no bytes.
                self.assertLessEqual(len(doc["initial_live"]), constants)
                self.assertGreaterEqual(len(doc["initial_live"]) + doc["source"]["skipped_empty_storages"],
                                        constants)
                self.assertGreater(len(doc["events"]), 100)

    def test_snapshot(self):
        out = os.path.join(STREAMS, "transformerlm2.7b.json.gz")
        result = run_cli(SNAPSHOT, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        doc = load(out)
        peak, live_at_end = validate(self, doc)
        with open(SNAPSHOT, "rb") as f:
            snapshot = pickle.load(f)
        # The reconstructed start plus the trace must end exactly in the dumped state.
        dumped_live = sum(b["requested_size"] for s in snapshot["segments"] for b in s["blocks"]
                          if b["state"] == "active_allocated")
        self.assertEqual(live_at_end, dumped_live)
        observed = doc["native_observed"]
        self.assertEqual(observed["peak_allocated"], peak)
        self.assertEqual(observed["reserved_at_end"], sum(s["total_size"] for s in snapshot["segments"]))
        self.assertGreaterEqual(observed["peak_reserved"], observed["reserved_at_end"])
        self.assertGreaterEqual(observed["peak_reserved"], observed["reserved_at_start"])
        self.assertGreater(observed["peak_reserved"], peak)
        trace = snapshot["device_traces"][0]
        self.assertEqual(sum(1 for e in trace if e["action"] == "alloc"),
                         sum(1 for e in doc["events"] if e["op"] == "alloc"))

    def test_plain_json_output(self):
        out = os.path.join(STREAMS, "unet-plain.json")
        result = run_cli(glob.glob(os.path.join(TRACES, "dtr", "unet-*.log"))[0], "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        validate(self, load(out))


class BadInput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def expect_error(self, path, fragment, *extra):
        result = run_cli(path, "-o", os.path.join(self.dir, "out.json"), *extra)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn(fragment, result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_unknown_format(self):
        self.expect_error(self.write("x.txt", b"hello"), "unknown trace format")

    def test_missing_file(self):
        self.expect_error(os.path.join(self.dir, "nope.pickle"), "no such file")

    def test_pickle_with_code_is_refused(self):
        class Evil:
            def __reduce__(self):
                return (os.system, ("true",))
        self.expect_error(self.write("evil.pickle", pickle.dumps(Evil())), "holds only plain data")

    def test_pickle_that_is_not_a_snapshot(self):
        self.expect_error(self.write("list.pickle", pickle.dumps([1, 2, 3])), "not a PyTorch memory snapshot")

    def test_truncated_pickle(self):
        with open(SNAPSHOT, "rb") as f:
            head = f.read(4096)
        self.expect_error(self.write("cut.pickle", head), "not a readable pickle")

    def test_snapshot_alloc_over_live_block(self):
        event = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1}
        snap = {"segments": [], "device_traces": [[event, dict(event, time_us=2)]]}
        self.expect_error(self.write("double.pickle", pickle.dumps(snap)), "device_traces event 1: alloc at 0x1000")

    def test_dtr_bad_line(self):
        log = b'{"INSTRUCTION":"CONSTANT","NAME":"x1"}\n{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"x1"}\nnot json\n'
        self.expect_error(self.write("bad.log", log), "bad.log:3: not JSON", "--format", "dtr")

    def test_dtr_view_of_unknown(self):
        log = (b'{"INSTRUCTION":"CALL","ARGS":["x9"],"RESULT":["x2"],"NAME":"view","TIME":"5"}\n'
               b'{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"x2"}\n'
               b'{"INSTRUCTION":"ALIAS","ALIAS":"0","NAME":"x2"}\n')
        self.expect_error(self.write("view.log", log), "x2 is a view of x9, which has no live handle")


class DtrSemantics(unittest.TestCase):
    def test_storage_freed_when_last_handle_of_any_view_goes(self):
        from dtr_log import import_dtr_log
        lines = [
            {"INSTRUCTION": "CONSTANT", "NAME": "w"}, {"INSTRUCTION": "MEMORY", "MEMORY": "64", "NAME": "w"},
            {"INSTRUCTION": "CALL", "ARGS": ["w"], "RESULT": ["a"], "NAME": "mul", "TIME": "1000"},
            {"INSTRUCTION": "MEMORY", "MEMORY": "4096", "NAME": "a"}, {"INSTRUCTION": "ALIAS", "ALIAS": "-1", "NAME": "a"},
            {"INSTRUCTION": "CALL", "ARGS": ["a"], "RESULT": ["v"], "NAME": "view", "TIME": "2000"},
            {"INSTRUCTION": "MEMORY", "MEMORY": "4096", "NAME": "v"}, {"INSTRUCTION": "ALIAS", "ALIAS": "0", "NAME": "v"},
            {"INSTRUCTION": "COPY", "DST": "v2", "SRC": "v"},
            {"INSTRUCTION": "RELEASE", "NAME": "a"}, {"INSTRUCTION": "RELEASE", "NAME": "v"},
            {"INSTRUCTION": "MUTATE", "ARGS": ["v2"], "MUTATE": [0], "NAME": "relu_", "TIME": "500"},
            {"INSTRUCTION": "RELEASE", "NAME": "v2"}, {"INSTRUCTION": "RELEASE", "NAME": "w"},
        ]
        path = os.path.join(tempfile.mkdtemp(), "t.log")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(line) for line in lines))
        doc = import_dtr_log(path).to_json()
        self.assertEqual(doc["initial_live"], [{"id": 0, "size": 64, "stream": 0}])
        self.assertEqual(doc["events"], [
            {"op": "alloc", "id": 1, "size": 4096, "stream": 0, "t": 0.0},
            {"op": "free", "id": 1, "t": 3.5},  # after mul (1 us), view (2 us) and relu_ (0.5 us)
        ])


if __name__ == "__main__":
    unittest.main(verbosity=1)
