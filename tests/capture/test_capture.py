"""The capture tool: exact read/write sets and lifetimes on a model small enough to know the
answer, and each known model captured at a small size."""

import os
import subprocess
import sys
import time

import pytest
import torch

import capture
import cost_model
import delta_trace
from delta_trace import NEVER, Access, Category, Phase
from iteration import capture_iteration
from models import Workload

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
ESTIMATE = capture.make_estimator(cost_model.profile("h200"))


def tiny_workload(dropout=False):
    with torch.device("meta"):
        layers = [torch.nn.Linear(4, 8), torch.nn.ReLU(inplace=True)]
        if dropout:
            layers.append(torch.nn.Dropout(0.5))
        layers.append(torch.nn.Linear(8, 2))
        model = torch.nn.Sequential(*layers)
    inputs = {"x": torch.randn(3, 4, device="meta"), "y": torch.randn(3, 2, device="meta")}
    loss = lambda m, b: torch.nn.functional.mse_loss(m(b["x"]), b["y"])  # noqa: E731
    return Workload("tiny", model, inputs, loss, "tiny")


def by_category(trace, category):
    return [b for b in trace.blocks if b.category == category]


def writers(trace, block_id):
    return [op for op in trace.ops if (block_id, Access.WRITE) in op.blocks]


def check_uses_inside_lifetimes(trace):
    for op in trace.ops:
        for block_id, _ in op.blocks:
            b = trace.blocks[block_id]
            assert b.alloc_ns == NEVER or b.alloc_ns <= op.start_ns, (op.name, b)
            assert b.free_ns == NEVER or b.free_ns >= op.start_ns + op.duration_ns, (op.name, b)


def test_tiny_model_steady_state_iteration_is_exact():
    trace = capture_iteration(tiny_workload(), ESTIMATE, warmup_steps=1)
    delta_trace.validate(trace)
    check_uses_inside_lifetimes(trace)
    params = by_category(trace, Category.PARAMETER)
    assert sorted(b.label for b in params) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert {b.label: b.size for b in params} == {"0.weight": 128, "0.bias": 32, "2.weight": 64, "2.bias": 8}
    assert len(by_category(trace, Category.INPUT)) == 2
    # exp_avg and exp_avg_sq per parameter, from the warm-up step: live before and after.
    state = by_category(trace, Category.OPTIMIZER_STATE)
    assert len(state) == 8 and all(b.alloc_ns == NEVER and b.free_ns == NEVER for b in state)

    forward = [op for op in trace.ops if op.phase == Phase.FORWARD]
    assert [op.name for op in forward] == ["aten::addmm", "aten::relu_", "aten::addmm", "aten::mse_loss"]
    hidden = [b for b, a in forward[0].blocks if a == Access.WRITE]
    assert len(hidden) == 1
    # relu_ works in place: it reads and writes the first linear layer's output, makes nothing.
    assert forward[1].blocks == [(hidden[0], Access.READ), (hidden[0], Access.WRITE)]
    assert trace.blocks[hidden[0]].category == Category.ACTIVATION
    backward_end = int(trace.metadata["backward_end_ns"])
    forward_end = int(trace.metadata["forward_end_ns"])
    assert forward_end < trace.blocks[hidden[0]].free_ns <= backward_end  # saved for backward, then freed

    grads = by_category(trace, Category.GRADIENT)
    assert sorted(b.label for b in grads) == ["grad:0.bias", "grad:0.weight", "grad:2.bias", "grad:2.weight"]
    for g in grads:
        made_by = writers(trace, g.id)
        assert len(made_by) == 1 and made_by[0].phase == Phase.BACKWARD
        assert made_by[0].name in ("aten::mm", "aten::sum.dim_IntList")
        readers = [op for op in trace.ops if (g.id, Access.READ) in op.blocks]
        assert readers and all(op.phase == Phase.OPTIMIZER for op in readers)
        assert g.free_ns == trace.iterations[0].end_ns  # zero_grad(set_to_none) at the step's end
    # The optimizer updates every parameter in place.
    updated = {b for op in trace.ops if op.phase == Phase.OPTIMIZER for b, a in op.blocks if a == Access.WRITE}
    assert {b.id for b in params} <= updated
    assert len(trace.blocks) == 4 + 2 + 8 + 3 + 3 + 4 + 1 + 4  # + fwd outputs, bwd temps, grads, relu grad, sqrt
    assert all(op.duration_estimated and op.duration_ns > 0 for op in trace.ops)
    assert trace.iterations[0].end_op == len(trace.ops)


def test_first_iteration_creates_optimizer_state():
    trace = capture_iteration(tiny_workload(), ESTIMATE, warmup_steps=0)
    state = by_category(trace, Category.OPTIMIZER_STATE)
    assert len(state) == 8
    for b in state:
        assert b.alloc_ns != NEVER and b.free_ns == NEVER
        assert writers(trace, b.id)[0].phase == Phase.OPTIMIZER


def test_dropout_keeps_a_one_byte_mask_as_on_cuda():
    trace = capture_iteration(tiny_workload(dropout=True), ESTIMATE, warmup_steps=0)
    dropout = [op for op in trace.ops if op.name == "aten::native_dropout"]
    assert len(dropout) == 1
    made = sorted(trace.blocks[b].size for b, a in dropout[0].blocks if a == Access.WRITE)
    assert made == [3 * 8, 3 * 8 * 4]  # bool mask and float output
    assert any(op.name == "aten::native_dropout_backward" for op in trace.ops)


MODELS = [("resnet50", 2, None), ("resnet101", 2, None), ("bert-large", 1, 64),
          ("gpt2-large", 1, 64), ("gpt2-xl", 1, 64)]
KNOWN_PARAMETERS = {"resnet50": 25_557_032, "gpt2-xl": 1_557_611_200}


@pytest.mark.parametrize("name,batch,seq", MODELS)
def test_known_models_capture(name, batch, seq):
    started = time.perf_counter()
    trace = capture.capture(name, batch, seq)
    seconds = time.perf_counter() - started
    delta_trace.validate(trace)
    params = [b for b in by_category(trace, Category.PARAMETER) if not b.label.startswith("buffer:")]
    grads = by_category(trace, Category.GRADIENT)
    state = by_category(trace, Category.OPTIMIZER_STATE)
    param_bytes = sum(b.size for b in params)
    assert len(grads) == len(params) and sum(b.size for b in grads) == param_bytes
    assert len(state) == 2 * len(params) and sum(b.size for b in state) == 2 * param_bytes
    if name in KNOWN_PARAMETERS:
        assert param_bytes == 4 * KNOWN_PARAMETERS[name]
    assert by_category(trace, Category.ACTIVATION)
    phases = {op.phase for op in trace.ops}
    assert phases == {Phase.FORWARD, Phase.BACKWARD, Phase.OPTIMIZER}
    peak, _ = delta_trace.peak_live(trace)
    assert peak > 4 * param_bytes  # parameters, gradients, two moments, and some activations
    print(f"\n{name} batch {batch} seq {seq}: {len(trace.ops)} ops, {len(trace.blocks)} blocks, "
          f"peak {peak / 2**30:.2f} GiB, {seconds:.1f} s")


def test_cli_writes_a_trace_and_rejects_bad_input(tmp_path):
    out = tmp_path / "r50.json.gz"
    script = os.path.join(ROOT, "tools", "capture", "capture.py")
    done = subprocess.run([sys.executable, script, "--model", "resnet50", "--batch", "1", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stderr
    trace = delta_trace.read(out)
    assert trace.source == "capture" and trace.model == "resnet50 batch 1" and trace.gpu.profile == "h200"
    bad = subprocess.run([sys.executable, script, "--model", "resnet50", "--batch", "0", "-o", str(tmp_path / "x")],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "batch must be at least 1" in bad.stderr
    assert not (tmp_path / "x").exists()


def test_written_trace_matches_the_json_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    import gzip
    import json
    schema_path = os.path.join(ROOT, "docs", "trace.schema.json")
    if not os.path.exists(schema_path):
        pytest.skip("docs/trace.schema.json is not there")
    with open(schema_path) as f:
        schema = json.load(f)
    path = tmp_path / "tiny.json.gz"
    delta_trace.write(capture_iteration(tiny_workload(dropout=True), ESTIMATE), path)
    with gzip.open(path, "rt") as f:
        jsonschema.validate(json.load(f), schema)
