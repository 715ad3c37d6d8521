"""The viewers and exports, on a hand-made trace whose answers are known and on a captured one."""

import base64
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

import analysis
import delta_trace
import memory_viz
from delta_trace import NEVER, Access, Block, Category, Iteration, Op, Phase, Trace
from html_report import write_html
from perfetto import chrome_trace
from png_report import write_png

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
REPORT = os.path.join(ROOT, "tools", "viewers", "report.py")


def hand_made_trace():
    """Block 0: a parameter, live throughout, used at 0 and 100. Block 1: an activation made at
    10, used at 10 and 60, freed at 70. Block 2: a temporary made at 60, freed at 80."""
    blocks = [Block(0, 1000, category=Category.PARAMETER, label="w"),
              Block(1, 4096, alloc_ns=10, free_ns=70, category=Category.ACTIVATION, label="h"),
              Block(2, 512, alloc_ns=60, free_ns=80, category=Category.TEMPORARY, label="t")]
    ops = [Op(0, "fwd", start_ns=0, duration_ns=5, phase=Phase.FORWARD, blocks=[(0, Access.READ)]),
           Op(1, "make_h", start_ns=10, duration_ns=10, phase=Phase.FORWARD, blocks=[(1, Access.WRITE)]),
           Op(2, "use_h", start_ns=60, duration_ns=5, phase=Phase.BACKWARD,
              blocks=[(1, Access.READ), (2, Access.WRITE)]),
           Op(3, "step", start_ns=100, duration_ns=10, phase=Phase.OPTIMIZER,
              blocks=[(0, Access.READ), (0, Access.WRITE)])]
    trace = Trace(source="test", model="hand-made", blocks=blocks, ops=ops,
                  iterations=[Iteration(0, 0, 110, 0, 4)])
    delta_trace.validate(trace)
    return trace


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    import capture
    trace = capture.capture("resnet50", 1)
    path = tmp_path_factory.mktemp("captured") / "resnet50.json.gz"
    delta_trace.write(trace, path)
    return trace, path


def test_memory_curve_and_gaps_are_exact():
    trace = hand_made_trace()
    curve = analysis.memory_curve(trace)
    assert curve.times == [0, 10, 60, 70, 80, 110]
    assert curve.total == [1000, 5096, 5608, 1512, 1000, 1000]
    assert curve.by_category["activation"] == [0, 4096, 4096, 0, 0, 0]
    assert curve.peak() == (5608, 60)
    gaps = {g.block: (g.start_ns, g.end_ns) for g in analysis.idle_gaps(trace)}
    assert gaps == {0: (5, 100), 1: (20, 60)}  # block 2 is used once: no gap
    ranked = analysis.swap_candidates(trace)
    assert [g.block for g in ranked] == [1, 0]  # 4096 B x 40 ns beats 1000 B x 95 ns
    [summary] = analysis.iteration_summaries(trace, curve)
    assert (summary.ops, summary.peak_bytes, summary.allocated_bytes) == (4, 5608, 4096 + 512)
    assert summary.ops_by_phase == {"forward": 2, "backward": 1, "optimizer": 1}


def test_perfetto_export_has_ops_per_stream_and_memory_counters():
    trace = hand_made_trace()
    data = json.loads(json.dumps(chrome_trace(trace)))
    slices = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in slices] == [
        ("fwd", 0.0, 0.005), ("make_h", 0.01, 0.01), ("use_h", 0.06, 0.005), ("step", 0.1, 0.01)]
    totals = [(e["ts"], e["args"]["total"]) for e in data["traceEvents"]
              if e["ph"] == "C" and e["name"] == "live bytes"]
    assert totals == [(0.0, 1000), (0.01, 5096), (0.06, 5608), (0.07, 1512), (0.08, 1000), (0.11, 1000)]
    by_category = [e for e in data["traceEvents"] if e["ph"] == "C" and e["name"] == "live bytes by category"]
    assert by_category[2]["args"] == {"parameter": 1000, "activation": 4096, "temporary": 512}
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in data["traceEvents"])


def _run_memory_viz(args):
    return subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz"] + args,
                          capture_output=True, text=True, timeout=120)


def test_memory_viz_snapshot_from_trace_opens_in_torch(tmp_path):
    trace = hand_made_trace()
    snapshot = memory_viz.snapshot_from_trace(trace)
    actions = [(e["action"], e["size"]) for e in snapshot["device_traces"][0]]
    assert actions == [("alloc", 4096), ("alloc", 512), ("free_requested", 4096), ("free_completed", 4096),
                       ("free_requested", 512), ("free_completed", 512)]
    # The parameter was live throughout: no event, an allocated one-block segment instead.
    assert [(s["total_size"], s["blocks"][0]["state"]) for s in snapshot["segments"]] == [(1000, "active_allocated")]
    path = tmp_path / "dump.pickle"
    memory_viz.write_snapshot(snapshot, path)
    html = tmp_path / "out.html"
    done = _run_memory_viz(["trace_plot", str(path), "-o", str(html)])
    assert done.returncode == 0, done.stderr
    text = html.read_text()
    embedded = json.loads(text.split("const local_files = ")[1].split("\n")[0])
    assert pickle.loads(base64.b64decode(embedded[0]["base64"]))["device_traces"] == snapshot["device_traces"]
    stats = _run_memory_viz(["stats", str(path)])  # segsum checks the segment accounting
    assert stats.returncode == 0 and "total_allocated: 1000.0B" in stats.stdout, stats.stderr


def test_memory_viz_snapshot_from_allocator_dump(tmp_path):
    dump = {"format": "delta-allocator-dump", "version": 1,
            "device": {"kind": "sim", "ordinal": 0, "total_bytes": 1 << 30, "granularity": 2 << 20},
            "config": {"max_split_size": None, "limit_bytes": 1 << 30},
            "stats": {"reserved_bytes": 2 << 20},
            "arenas": [{"stream": 0, "pool": "small", "base": 1 << 32, "va_size": 1 << 30, "page_size": 2 << 20,
                        "mapped_pages": [[0, 1]],
                        "blocks": [{"ptr": 1 << 32, "size": 1024, "state": "allocated", "requested": 1000},
                                   {"ptr": (1 << 32) + 1024, "size": (2 << 20) - 1024, "state": "free"}]}],
            "events_recorded": 4,
            "events": [{"kind": "map", "t_ns": 500, "ptr": 1 << 32, "size": 2 << 20, "stream": 0},
                       {"kind": "alloc", "t_ns": 1000, "ptr": 1 << 32, "size": 1024, "stream": 0},
                       {"kind": "alloc", "t_ns": 2000, "ptr": (1 << 32) + 1024, "size": 512, "stream": 0},
                       {"kind": "free", "t_ns": 3000, "ptr": (1 << 32) + 1024, "size": 512, "stream": 0}]}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    out = tmp_path / "dump.pickle"
    done = subprocess.run([sys.executable, REPORT, str(path), "--memory-viz", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    snapshot = pickle.loads(out.read_bytes())
    assert [e["action"] for e in snapshot["device_traces"][0]] == [
        "segment_map", "alloc", "alloc", "free_requested", "free_completed"]
    [segment] = snapshot["segments"]
    assert segment["total_size"] == 2 << 20 and segment["allocated_size"] == 1024
    stats = _run_memory_viz(["stats", str(out)])
    assert stats.returncode == 0, stats.stderr
    html = tmp_path / "dump.html"
    assert _run_memory_viz(["trace_plot", str(out), "-o", str(html)]).returncode == 0 and html.stat().st_size > 0
    refused = subprocess.run([sys.executable, REPORT, str(path), "--html", str(tmp_path / "x.html")],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "only --memory-viz" in refused.stderr


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_report_renders_in_headless_chromium(captured, tmp_path):
    trace, _ = captured
    page = tmp_path / "report.html"
    write_html(trace, page)
    text = page.read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in text
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium) and could not be installed")
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = done.stdout
    assert 'data-rendered="ok"' in dom, done.stderr[-2000:]  # the inline script ran to its end
    assert '<svg id="memory-chart"' in dom and 'data-category="activation"' in dom
    assert 'id="peak">Peak ' in dom  # filled in by the script
    for table in ("iterations", "largest-blocks", "swap-candidates"):
        assert f'<table id="{table}">' in dom
    assert dom.count("<tr>") >= 1 + 1 + 20 + 1 + 20 + 1


def test_png_and_cli_on_a_captured_trace(captured, tmp_path):
    trace, path = captured
    png = tmp_path / "memory.png"
    write_png(trace, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    outputs = {flag: tmp_path / name for flag, name in
               (("--html", "r.html"), ("--png", "r.png"), ("--perfetto", "r.json"), ("--memory-viz", "r.pickle"))}
    args = [sys.executable, REPORT, str(path)] + [str(x) for pair in outputs.items() for x in pair]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert all(p.stat().st_size > 0 for p in outputs.values())
    perfetto = json.loads(outputs["--perfetto"].read_text())
    assert sum(1 for e in perfetto["traceEvents"] if e["ph"] == "X") == len(trace.ops)
    snapshot = pickle.loads(outputs["--memory-viz"].read_bytes())
    allocs = sum(1 for e in snapshot["device_traces"][0] if e["action"] == "alloc")
    assert allocs == sum(1 for b in trace.blocks if b.alloc_ns != NEVER and b.free_ns != b.alloc_ns)
    html = tmp_path / "viz.html"
    assert _run_memory_viz(["trace_plot", str(outputs["--memory-viz"]), "-o", str(html)]).returncode == 0
    assert html.stat().st_size > len(outputs["--memory-viz"].read_bytes())
    summary = subprocess.run([sys.executable, REPORT, str(path)], capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0 and "resnet50 batch 1" in summary.stdout and "swap candidate" in summary.stdout


def test_cli_names_a_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = subprocess.run([sys.executable, REPORT, str(bad), "--html", str(tmp_path / "x.html")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "bad.json" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.html").exists()


FRONTIER = os.path.join(ROOT, "tools", "plots", "frontier.py")


def test_frontier_plot_and_table_from_compare_results(tmp_path):
    rows = [{"trace": "net-a", "method": "delta", "budget_ratio": 0.5, "feasible": True, "overhead": 1.05, "peak_bytes": 5},
            {"trace": "net-a", "method": "dtr", "budget_ratio": 0.5, "feasible": True, "overhead": 1.10, "peak_bytes": 5},
            {"trace": "net-a", "method": "dtr", "budget_ratio": 0.2, "feasible": False, "overhead": None, "peak_bytes": 0,
             "reason": "op 3: budget exceeded"},
            {"trace": "net-a", "method": "delta", "budget_ratio": 0.2, "feasible": True, "overhead": 1.30, "peak_bytes": 2},
            {"trace": "net-b", "method": "delta", "budget_ratio": 0.5, "feasible": True, "overhead": 1.00, "peak_bytes": 5}]
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    png, page = tmp_path / "f.png", tmp_path / "f.html"
    subprocess.run([sys.executable, FRONTIER, str(results), "--png", str(png), "--html", str(page)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert text.count("<table>") == 2                      # one table per trace
    assert "<td class='best'>1.050</td>" in text           # the lowest feasible overhead is marked
    assert "infeasible" in text and "op 3: budget exceeded" in text


def test_frontier_shades_the_lower_bound(tmp_path):
    rows = [{"trace": "net-a", "method": "delta", "budget_ratio": 0.5, "feasible": True, "overhead": 1.05, "peak_bytes": 5},
            {"trace": "net-a", "method": "delta", "budget_ratio": 0.2, "feasible": False, "overhead": None, "peak_bytes": 0}]
    bounds = [{"trace": "net-a", "budget_ratio": 0.5, "reachable": True, "overhead_lower_bound": 1.02},
              {"trace": "net-a", "budget_ratio": 0.2, "reachable": False, "overhead_lower_bound": None}]
    results, bound = tmp_path / "results.jsonl", tmp_path / "bound.jsonl"
    results.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    bound.write_text("\n".join(json.dumps(r) for r in bounds) + "\n")
    png, page = tmp_path / "f.png", tmp_path / "f.html"
    subprocess.run([sys.executable, FRONTIER, str(results), "--bound", str(bound), "--png", str(png), "--html", str(page)],
                   check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert "<th>lower bound</th>" in text
    assert "<td>&ge; 1.020</td>" in text and "<td>unreachable</td>" in text
    # compare output given as bounds is refused, naming the missing field
    done = subprocess.run([sys.executable, FRONTIER, str(results), "--bound", str(results), "--html", str(page)],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "reachable" in done.stderr


def test_frontier_refuses_malformed_results(tmp_path):
    results = tmp_path / "bad.jsonl"
    results.write_text('{"trace": "x", "method": "delta"}\nnot json\n')
    done = subprocess.run([sys.executable, FRONTIER, str(results), "--html", str(tmp_path / "x.html")],
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "bad.jsonl:1" in done.stderr


PLAN_TIMELINE = os.path.join(ROOT, "tools", "plots", "plan_timeline.py")


def hand_made_timeline(feasible=True):
    """Three ops; the plan replays 2 ms before op 2 and stalls 1 ms before op 1."""
    ops = {"name": ["make", "wait", "use"], "native_start_ns": [0, 5_000_000, 10_000_000],
           "native_live_bytes": [3 << 30, 4 << 30, 2 << 30], "start_ns": [0, 6_000_000, 13_000_000],
           "end_ns": [5_000_000, 11_000_000, 18_000_000], "held_bytes": [1 << 30, 2 << 30, 2 << 30],
           "peak_bytes": [1 << 30, 2 << 30, 3 << 30], "replay_ns": [0, 0, 2_000_000], "stall_ns": [0, 1_000_000, 0]}
    timeline = {"format": "delta-plan-timeline", "version": 1, "trace": "net.json", "model": "net", "method": "delta",
                "gpu": "h200", "budget_bytes": 3 << 30, "through_allocator": False, "feasible": feasible,
                "native_step_ns": 15_000_000, "native_peak_bytes": 4 << 30, "step_ns": 18_000_000, "ops": ops}
    if not feasible:
        timeline["error"] = "op 2 (use): budget exceeded"
        timeline["first_bad_op"] = 2
        for column in ops.values():
            del column[2:]
    return timeline


def test_plan_timeline_draws_memory_and_delays(tmp_path):
    data = tmp_path / "t.json"
    data.write_text(json.dumps(hand_made_timeline()))
    png, page = tmp_path / "t.png", tmp_path / "t.html"
    subprocess.run([sys.executable, PLAN_TIMELINE, str(data), "--png", str(png), "--html", str(page)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert "<th>step</th><td>18.00 ms against 15.00 ms native (1.2000x)</td>" in text
    assert "<th>most bytes held</th><td>3.00 GiB</td>" in text        # the replay's burst counts
    assert "<th>replayed compute</th><td>2.00 ms</td>" in text
    assert "<th>stalls</th><td>1.00 ms</td>" in text
    assert "<table id='replays'><tr><th>op</th><th>ms</th></tr><tr><td>use</td><td>2.00</td></tr>" in text
    assert "data:image/png;base64," in text
    assert not list(tmp_path.glob("*.partial"))


def test_plan_timeline_draws_the_copy_lanes(tmp_path):
    timeline = hand_made_timeline()
    # Two copies out overlapping by 1 ms (busy 5 ms), one copy back.
    timeline["copies"] = {"to_host": [True, True, False], "start_ns": [0, 2_000_000, 8_000_000],
                          "end_ns": [3_000_000, 5_000_000, 9_500_000], "block": [1, 2, 1],
                          "bytes": [1 << 30, 1 << 30, 1 << 30]}
    data = tmp_path / "t.json"
    data.write_text(json.dumps(timeline))
    png, page = tmp_path / "t.png", tmp_path / "t.html"
    subprocess.run([sys.executable, PLAN_TIMELINE, str(data), "--png", str(png), "--html", str(page)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ("<th>copy lanes</th><td>to host 2 copies, busy 5.00 ms; to device 1 copies, busy 1.50 ms</td>"
            in page.read_text())
    timeline["copies"]["end_ns"].pop()
    data.write_text(json.dumps(timeline))
    done = subprocess.run([sys.executable, PLAN_TIMELINE, str(data), "--html", str(page)], capture_output=True, text=True)
    assert done.returncode != 0 and "copy columns differ in length" in done.stderr


def test_plan_timeline_of_a_failing_plan_says_where(tmp_path):
    data = tmp_path / "t.json"
    data.write_text(json.dumps(hand_made_timeline(feasible=False)))
    page = tmp_path / "t.html"
    subprocess.run([sys.executable, PLAN_TIMELINE, str(data), "--html", str(page)], check=True)
    assert "<th>infeasible</th><td>op 2 (use): budget exceeded</td>" in page.read_text()


def test_plan_timeline_refuses_what_is_not_a_timeline(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text('{"trace": "x", "method": "delta"}\n')
    broken = tmp_path / "broken.json"
    timeline = hand_made_timeline()
    timeline["ops"]["held_bytes"].pop()
    broken.write_text(json.dumps(timeline))
    for path, message in ((results, "not a plan timeline"), (broken, "differ in length"),
                          (tmp_path / "missing.json", "cannot read")):
        done = subprocess.run([sys.executable, PLAN_TIMELINE, str(path), "--html", str(tmp_path / "x.html")],
                              capture_output=True, text=True)
        assert done.returncode != 0 and message in done.stderr, (path, done.stderr)
        assert not (tmp_path / "x.html").exists()


EXECUTE_TIMELINE = os.path.join(ROOT, "tools", "plots", "execute_timeline.py")


def hand_made_execute_timeline():
    """The plan of hand_made_timeline() run: op 1 starts 2 ms after the plan said, op 2 0.5 ms."""
    planned = hand_made_timeline()
    planned["ops"]["reserved_bytes"] = [1 << 30, 2 << 30, 2 << 30]
    planned["copies"] = {"to_host": [True, False], "start_ns": [0, 8_000_000], "end_ns": [3_000_000, 9_000_000],
                         "block": [1, 1], "bytes": [1 << 30, 1 << 30]}
    executed_ops = {"op": [0, 1, 2], "start_ns": [0, 8_000_000, 13_500_000], "end_ns": [5_000_000, 13_000_000, 18_500_000],
                    "reserved_bytes": [1 << 30, 2 << 30, 2 << 30]}
    spans = {"to_host": [True, False], "start_ns": [0, 8_500_000], "end_ns": [3_000_000, 9_500_000], "bytes": [1, 1]}
    return {"format": "delta-execute-timeline", "version": 1, "planned": planned,
            "executed": {"step_ns": 18_500_000, "reserved_peak_bytes": 2 << 30, "ops": executed_ops, "copies": spans,
                         "replays": {"to_host": [False], "start_ns": [12_000_000], "end_ns": [13_000_000], "bytes": [0]}},
            "cache": {"step_ns": 15_000_000, "ops": {"op": [0, 1, 2], "start_ns": [0, 5_000_000, 10_000_000],
                                                     "end_ns": [5_000_000, 10_000_000, 15_000_000],
                                                     "reserved_bytes": [3 << 30, 4 << 30, 4 << 30]}}}


def test_execute_timeline_sets_the_run_beside_the_plan(tmp_path):
    data = tmp_path / "e.json"
    data.write_text(json.dumps(hand_made_execute_timeline()))
    png, page = tmp_path / "e.png", tmp_path / "e.html"
    subprocess.run([sys.executable, EXECUTE_TIMELINE, str(data), "--png", str(png), "--html", str(page)], check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = page.read_text()
    assert ("<th>step</th><td>executed 18.50 ms, planned 18.00 ms (1.0278x the plan), cache mode 15.00 ms</td>"
            in text)
    assert "<th>most behind the plan</th><td>op 1 (wait): 2.00 ms</td>" in text
    assert "<th>replayed kernels</th><td>executed 1</td>" in text
    assert not list(tmp_path.glob("*.partial"))


def test_execute_timeline_refuses_what_is_not_one(tmp_path):
    plan_only = tmp_path / "plan.json"
    plan_only.write_text(json.dumps(hand_made_timeline()))
    broken = tmp_path / "broken.json"
    doc = hand_made_execute_timeline()
    doc["executed"]["ops"]["end_ns"].pop()
    broken.write_text(json.dumps(doc))
    for path, message in ((plan_only, "not an execute timeline"), (broken, "differ in length"),
                          (tmp_path / "missing.json", "cannot read")):
        done = subprocess.run([sys.executable, EXECUTE_TIMELINE, str(path), "--html", str(tmp_path / "x.html")],
                              capture_output=True, text=True)
        assert done.returncode != 0 and message in done.stderr, (path, done.stderr)
