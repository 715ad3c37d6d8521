"""The largest-batch search: the search itself on predicates with known answers, then a real run
on ResNet-18 under a 300 MiB budget whose answers are re-checked with deltactl directly."""

import json
import os
import subprocess
import sys

import pytest

import largest_batch
from largest_batch import SearchError, largest_passing, parse_bytes

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "capture", "largest_batch.py")
MiB = 1 << 20


def deltactl_or_skip():
    try:
        return largest_batch.find_deltactl()
    except SearchError as e:
        pytest.skip(str(e))


def counted(threshold):
    asked = []

    def passes(batch):
        asked.append(batch)
        return batch <= threshold
    return passes, asked


@pytest.mark.parametrize("threshold,max_batch,expected", [
    (37, 1024, (37, 38)), (1, 1024, (1, 2)), (0, 1024, (0, 1)), (64, 1024, (64, 65)),
    (99, 100, (99, 100)), (100, 100, (100, None)), (5000, 1024, (1024, None)), (3, 1, (1, None)),
])
def test_search_finds_the_boundary(threshold, max_batch, expected):
    passes, asked = counted(threshold)
    assert largest_passing(passes, max_batch) == expected
    assert all(1 <= b <= max_batch for b in asked)
    assert len(asked) <= 2 * max_batch.bit_length() + 1  # doubling then bisection, not a scan


def test_budgets_parse_as_bytes_and_tiny_or_odd_ones_are_refused():
    assert parse_bytes("140GiB") == 140 << 30
    assert parse_bytes("700MiB") == 700 * MiB
    assert parse_bytes("1.5GiB") == 3 << 29
    assert parse_bytes("6442450944") == 6442450944
    for bad in ("0.5", "1", "12GB", "lots", ""):
        with pytest.raises(SearchError):
            parse_bytes(bad)


def record(batch, native, overhead):
    return {"batch": batch, "native_feasible": native, "delta_feasible": overhead is not None,
            "delta_overhead": overhead}


def test_warnings_name_what_contradicts_the_monotone_assumption():
    consistent = {1: record(1, True, 1.0), 2: record(2, False, 1.1), 4: record(4, False, 1.3),
                  8: record(8, False, None)}
    assert largest_batch.monotonicity_warnings(consistent, 1, 2, 0.2) == []
    odd = {1: record(1, True, 1.0), 2: record(2, False, 1.5), 3: record(3, True, 1.1), 4: record(4, False, 1.25)}
    warnings = largest_batch.monotonicity_warnings(odd, 1, 1, 0.2)
    assert "native: batch 3 fits although the answer is 1" in warnings
    assert "delta: batch 3 is within the overhead bound although the answer is 1" in warnings
    assert "delta: overhead falls from 1.500 at batch 2 to 1.100 at batch 3" in warnings
    assert len(warnings) == 3


def plan(deltactl, trace, method, budget, out):
    return subprocess.run([deltactl, "plan", str(trace), "--budget", str(budget), "--gpu", "h200",
                           "--method", method, "-o", str(out)], capture_output=True, text=True, timeout=120)


def predicted(path):
    with open(path) as f:
        return json.load(f)["predicted"]


def test_resnet18_under_300_mib(tmp_path):
    deltactl = deltactl_or_skip()
    budget = 300 * MiB
    keep = tmp_path / "keep"
    # ResNet-18 rather than a deeper model: its captures plan in seconds, so the search ends in
    # about a minute. The limit guards against a hang, it does not time the search.
    done = subprocess.run([sys.executable, SCRIPT, "--model", "resnet18", "--budget", "300MiB",
                           "--max-batch", "32", "--json", "--keep", str(keep), "--deltactl", deltactl],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "largest_batch: batch 1: native peak" in done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    native, delta = result["native"], result["delta"]
    assert result["budget_bytes"] == budget
    assert 1 <= native["batch"] <= delta["batch"] < 32
    assert native["next_batch"] == native["batch"] + 1 and delta["next_batch"] == delta["batch"] + 1
    assert result["gain"] == pytest.approx(delta["batch"] / native["batch"])

    def trace(batch):
        path = keep / f"resnet18-b{batch}-h200.json.gz"
        assert path.exists(), path
        return path

    # Natively, the answer fits and the next batch does not: checked again with deltactl.
    fits = plan(deltactl, trace(native["batch"]), "native", budget, tmp_path / "n.json")
    assert fits.returncode == 0, fits.stderr
    assert predicted(tmp_path / "n.json")["peak_bytes"] == native["peak_bytes"] <= budget
    over = plan(deltactl, trace(native["next_batch"]), "native", budget, tmp_path / "n2.json")
    assert over.returncode != 0 and "no feasible plan" in over.stderr
    # Over the budget in live bytes, or under it but unplaceable by the capped caching allocator.
    assert native["next_live_peak_bytes"] > budget or "cannot place it (fragmentation)" in over.stderr

    # With DELTA, the answer is within 1.2x native and the next batch is over it (or infeasible).
    ok = plan(deltactl, trace(delta["batch"]), "delta", budget, tmp_path / "d.json")
    assert ok.returncode == 0, ok.stderr
    at_answer = predicted(tmp_path / "d.json")
    assert at_answer["feasible"] and at_answer["peak_bytes"] <= budget
    assert at_answer["overhead"] == pytest.approx(delta["overhead"]) and at_answer["overhead"] <= 1.2
    beyond = plan(deltactl, trace(delta["next_batch"]), "delta", budget, tmp_path / "d2.json")
    if beyond.returncode == 0:
        assert predicted(tmp_path / "d2.json")["overhead"] > 1.2
        assert delta["next_overhead"] == pytest.approx(predicted(tmp_path / "d2.json")["overhead"])
    else:
        assert delta["next_overhead"] is None and delta["next_reason"]

    # Every batch tried agrees with the two answers, i.e. feasibility was monotone here.
    for record in result["tried"]:
        assert record["native_feasible"] == (record["batch"] <= native["batch"])
        within = record["delta_feasible"] and record["delta_overhead"] <= 1.2
        assert within == (record["batch"] <= delta["batch"])


def test_table_output_names_both_answers_and_the_gain(tmp_path):
    deltactl = deltactl_or_skip()
    done = subprocess.run([sys.executable, SCRIPT, "--model", "resnet18", "--budget", "300MiB", "--max-batch", "4",
                           "--deltactl", deltactl, "-q"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("resnet18 on h200, budget 0.29 GiB")
    assert lines[2].split()[:2] == ["native", "4"] and lines[3].split()[:2] == ["delta", "4"]
    assert "max-batch reached" in lines[2] and lines[-1] == "gain: 1.00x"
    assert "largest_batch: batch" not in done.stderr


def error_line(done):
    lines = [l for l in done.stderr.strip().splitlines() if l.startswith("largest_batch: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_bad_input_is_named_and_exits_non_zero(tmp_path):
    deltactl = deltactl_or_skip()
    cases = [
        (["--model", "resnet50", "--deltactl", str(tmp_path / "no-such-deltactl")], "does not exist"),
        (["--model", "nope", "--deltactl", deltactl], "unknown model 'nope'"),
        (["--model", "resnet50", "--gpu", "h900", "--deltactl", deltactl], "unknown GPU profile 'h900'"),
        (["--model", "resnet50", "--budget", "lots", "--deltactl", deltactl], "budget 'lots'"),
        (["--model", "resnet50", "--max-batch", "0", "--deltactl", deltactl], "--max-batch must be at least 1"),
    ]
    for arguments, expected in cases:
        done = subprocess.run([sys.executable, SCRIPT, *arguments], capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, (arguments, done.stderr)
        assert expected in error_line(done)
        assert done.stdout == ""


def test_a_failed_capture_ends_the_search_with_one_line(monkeypatch, capsys, tmp_path):
    deltactl = deltactl_or_skip()
    import capture

    def broken(model, batch, seq=None, gpu="h200", **kwargs):
        raise RuntimeError("meta tensors cannot do that\nsecond line")
    monkeypatch.setattr(capture, "capture", broken)
    code = largest_batch.main(["--model", "resnet50", "--deltactl", deltactl, "--keep", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert "largest_batch: error: capture of resnet50 batch 1 failed: meta tensors cannot do that\n" in err
    assert "second line" not in err


def test_a_deltactl_that_fails_otherwise_is_not_read_as_infeasible(tmp_path, capsys):
    # A binary that fails every plan for a reason other than the budget.
    fake = tmp_path / "deltactl"
    fake.write_text("#!/bin/sh\necho 'deltactl: error: cannot open the trace file' >&2\nexit 1\n")
    fake.chmod(0o755)
    code = largest_batch.main(["--model", "resnet50", "--deltactl", str(fake), "--max-batch", "2", "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert "deltactl plan failed" in err and "cannot open the trace file" in err
