"""Foreach ops captured as the kernels a GPU runs them as: the launch rules of multi_tensor_apply,
and an AdamW step whose updates each take several launches."""

import os
import subprocess
import sys

import pytest
import torch

import capture
import cost_model
import delta_trace
import multi_tensor
from delta_trace import Access, Category, Phase
from iteration import capture_iteration
from models import Workload

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHUNK = multi_tensor.CHUNK_ELEMENTS
ESTIMATE = capture.make_estimator(cost_model.profile("h200"))


def test_a_launch_holds_320_chunks_and_a_cut_tensor_goes_on_in_the_next():
    # Five tensors of 100 chunks: 320 chunks fill the first launch part way into the fourth.
    launches = multi_tensor.launches([100 * CHUNK] * 5, depth=1)
    assert launches == [[(0, 100 * CHUNK), (1, 100 * CHUNK), (2, 100 * CHUNK), (3, 20 * CHUNK)],
                        [(3, 80 * CHUNK), (4, 100 * CHUNK)]]


def test_a_partial_last_chunk_counts_as_a_chunk():
    launches = multi_tensor.launches([320 * CHUNK + 1, 5], depth=2)
    assert launches == [[(0, 320 * CHUNK)], [(0, 1), (1, 5)]]


def test_the_tensors_a_launch_holds_shrink_with_depth_and_scalar_lists():
    small = [10] * 200
    assert [len(x) for x in multi_tensor.launches(small, depth=1)] == [110, 90]
    assert [len(x) for x in multi_tensor.launches(small, depth=1, scalar_list=True)] == [96, 96, 8]
    assert [len(x) for x in multi_tensor.launches(small, depth=3)] == [48] * 4 + [8]
    assert [len(x) for x in multi_tensor.launches(small, depth=5)] == [30] * 6 + [20]


def test_every_element_is_in_exactly_one_launch_and_empty_tensors_in_none():
    numels = [0, 3, 700 * CHUNK + 17, 0, CHUNK, 5 * CHUNK - 1, 0]
    launches = multi_tensor.launches(numels, depth=2, scalar_list=True)
    done = [0] * len(numels)
    for launch in launches:
        assert sum(-(-elements // CHUNK) for _, elements in launch) <= multi_tensor.MAX_BLOCKS
        for index, elements in launch:
            done[index] += elements
    assert done == numels
    assert all(index not in (0, 3, 6) for launch in launches for index, _ in launch)
    assert multi_tensor.launches([], depth=1) == [] and multi_tensor.launches([0, 0], depth=1) == []


@pytest.mark.parametrize("depth", [0, 6])
def test_a_depth_multi_tensor_apply_does_not_take_is_refused(depth):
    with pytest.raises(ValueError, match="1 to 5 tensor lists"):
        multi_tensor.launches([1], depth=depth)


def wide_workload():
    # One weight of 2048 x 12288 (384 chunks): every AdamW update over it takes two launches,
    # the first over the weight alone, the second over its rest and the bias.
    with torch.device("meta"):
        model = torch.nn.Linear(2048, 12288)
    inputs = {"x": torch.randn(2, 2048, device="meta")}
    return Workload("wide", model, inputs, lambda m, b: m(b["x"]).sum(), "wide")


def optimizer_ops(trace):
    return [op for op in trace.ops if op.phase == Phase.OPTIMIZER]


def test_an_adamw_step_is_captured_launch_by_launch():
    trace = capture_iteration(wide_workload(), ESTIMATE, warmup_steps=1)
    weight = next(b.id for b in trace.blocks if b.category == Category.PARAMETER and b.label == "weight")
    bias = next(b.id for b in trace.blocks if b.category == Category.PARAMETER and b.label == "bias")
    ops = optimizer_ops(trace)
    names = [op.name for op in ops]
    foreach = [name for k, name in enumerate(names) if k % 2 == 0]
    assert names == [name for name in foreach for _ in range(2)]  # each update: two launches in a row
    assert all(name.startswith("aten::_foreach_") for name in foreach)
    assert trace.metadata["foreach_launches"] == str(len(ops))
    assert trace.metadata["foreach_ops"] == str(len(ops) // 2)
    # The weight decay (`_foreach_mul_` over the parameters): the weight first, then its rest and the bias.
    decay = ops[0]
    assert decay.name == "aten::_foreach_mul_.Scalar"
    assert decay.blocks == [(weight, Access.READ), (weight, Access.WRITE)]
    assert ops[1].blocks == [(weight, Access.READ), (weight, Access.WRITE), (bias, Access.READ), (bias, Access.WRITE)]
    for first, second in zip(ops[::2], ops[1::2]):
        assert first.start_ns + first.duration_ns == second.start_ns  # back to back
        assert first.duration_ns > 0 and second.duration_ns > 0
        # 320 of the weight's 384 chunks, then 64 and the bias's one
        assert first.duration_ns > second.duration_ns
    # Each op's launches take what the op took whole, and use what it used.
    assert trace.metadata["foreach"] == "launches"
    whole = capture_iteration(wide_workload(), ESTIMATE, warmup_steps=1, foreach_launches=False)
    assert whole.metadata["foreach"] == "whole" and whole.metadata["foreach_launches"] == "0"
    assert trace.iterations[0].end_ns == whole.iterations[0].end_ns
    whole_ops = optimizer_ops(whole)
    assert [op.name for op in whole_ops] == foreach
    for k, op in enumerate(whole_ops):
        first, second = ops[2 * k], ops[2 * k + 1]
        assert (first.start_ns, second.start_ns + second.duration_ns) == (op.start_ns, op.start_ns + op.duration_ns)
        assert set(first.blocks) | set(second.blocks) == set(op.blocks)


def test_the_cli_captures_foreach_ops_whole_when_asked(tmp_path):
    out = tmp_path / "gpt2.json.gz"
    script = os.path.join(ROOT, "tools", "capture", "capture.py")
    base = [sys.executable, script, "--model", "gpt2-large", "--batch", "1", "--seq", "16", "-q"]
    done = subprocess.run(base + ["--foreach", "whole", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    whole = delta_trace.read(out)
    done = subprocess.run(base + ["-o", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    split = delta_trace.read(out)
    # AdamW's 8 updates over gpt2-large's 774 M parameters: 39 or 40 launches each (scalar lists, depth).
    assert len([op for op in whole.ops if op.phase == Phase.OPTIMIZER]) == 8
    launches = [op for op in split.ops if op.phase == Phase.OPTIMIZER]
    assert split.metadata["foreach_ops"] == "8" and split.metadata["foreach_launches"] == str(len(launches))
    assert 8 * 30 < len(launches) < 8 * 50
    assert len(split.ops) - len(launches) == len(whole.ops) - 8
    assert split.iterations[0].end_ns == whole.iterations[0].end_ns
    bad = subprocess.run(base + ["--foreach", "some", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--foreach" in bad.stderr


def test_an_update_too_short_for_its_launches_stays_one_op():
    # An estimate of 1 ns cannot give each of the two launches a nanosecond: the op stays whole.
    trace = capture_iteration(wide_workload(), lambda *args: 1, warmup_steps=1)
    ops = optimizer_ops(trace)
    assert len(ops) == 8 and all(op.duration_ns == 1 for op in ops)
    assert trace.metadata["foreach_ops"] == "0" and trace.metadata["foreach_launches"] == "0"


def test_every_launch_lasts_at_least_a_nanosecond():
    # Two launches in 3 ns: the split gives each one, and the rest by elements.
    trace = capture_iteration(wide_workload(), lambda *args: 3, warmup_steps=1)
    ops = optimizer_ops(trace)
    assert len(ops) == 16 and all(op.duration_ns >= 1 for op in ops)
    for first, second in zip(ops[::2], ops[1::2]):
        assert first.duration_ns + second.duration_ns == 3 and first.start_ns + first.duration_ns == second.start_ns
