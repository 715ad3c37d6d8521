"""Captures one training iteration (forward, backward, AdamW step, zero_grad) as a trace."""

import contextlib
import time

import torch

import paths  # noqa: F401
from delta_trace import NEVER, Category, Iteration, Phase, Trace
from recorder import CaptureRecorder


def _module_hooks(recorder, model):
    names = {module: name or type(module).__name__ for name, module in model.named_modules()}

    def enter(module, args):
        recorder.module_path.append(names.get(module, type(module).__name__))

    def leave(module, args, output):
        if recorder.module_path:
            recorder.module_path.pop()

    return [torch.nn.modules.module.register_module_forward_pre_hook(enter),
            torch.nn.modules.module.register_module_forward_hook(leave)]


@contextlib.contextmanager
def cuda_dropout():
    """Dropout as CUDA runs it. ATen uses the fused native_dropout (output plus a one-byte mask)
    only for CUDA-like tensors; on meta and CPU it falls back to a float noise tensor four times
    the mask's size, which would misstate the activations every dropout layer keeps."""
    original = torch.nn.functional.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0 or input.numel() == 0:
            return original(input, p, training, inplace)
        output = torch.ops.aten.native_dropout(input, p, True)[0]
        return input.copy_(output) if inplace else output

    torch.nn.functional.dropout = dropout
    try:
        yield
    finally:
        torch.nn.functional.dropout = original


def _state_tensors(optimizer, param_names):
    for param, state in optimizer.state.items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                yield f"{key}:{param_names.get(param, '?')}", value


def capture_iteration(workload, estimate_ns, device="meta", warmup_steps=1, lr=1e-4, progress=None,
                      foreach_launches=True):
    """Trace of one iteration of `workload` trained with AdamW. `warmup_steps` full steps run
    first, untraced, so that the traced step is a steady-state one: optimizer state exists
    before it and gradients are created by backward (zero_grad sets them to None).
    `foreach_launches`: each foreach op as the kernels a GPU runs it as (multi_tensor.py), else
    one op."""
    with cuda_dropout():
        return _capture(workload, estimate_ns, device, warmup_steps, lr, progress or (lambda m: None),
                        foreach_launches)


def _capture(workload, estimate_ns, device, warmup_steps, lr, say, foreach_launches):
    model = workload.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, foreach=True)
    for step in range(warmup_steps):
        started = time.perf_counter()
        workload.loss(model, workload.inputs).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        say(f"warm-up step {step + 1}/{warmup_steps} in {time.perf_counter() - started:.1f} s")

    recorder = CaptureRecorder(device, estimate_ns, foreach_launches=foreach_launches)
    param_names = {p: n for n, p in model.named_parameters()}
    for name, param in model.named_parameters():
        recorder.track(param, Category.PARAMETER, name)
    for name, buffer in model.named_buffers():
        if recorder.is_device_tensor(buffer):
            recorder.track(buffer, Category.PARAMETER, f"buffer:{name}")
    for name, tensor in workload.inputs.items():
        recorder.track(tensor, Category.INPUT, f"input:{name}")
    for label, tensor in _state_tensors(optimizer, param_names):
        if recorder.is_device_tensor(tensor):
            recorder.track(tensor, Category.OPTIMIZER_STATE, label)

    hooks = _module_hooks(recorder, model)
    phase_end = {}
    try:
        with recorder:
            started = time.perf_counter()
            recorder.phase = Phase.FORWARD
            loss = workload.loss(model, workload.inputs)
            phase_end["forward"] = recorder.clock_ns
            say(f"forward: {len(recorder.ops)} ops in {time.perf_counter() - started:.1f} s")
            recorder.phase = Phase.BACKWARD
            loss.backward()
            del loss  # a training loop keeps only loss.item(); the graph's outputs go now
            phase_end["backward"] = recorder.clock_ns
            grads = {param_names[p]: p.grad for p in model.parameters() if p.grad is not None}
            say(f"backward: {len(recorder.ops)} ops in {time.perf_counter() - started:.1f} s")
            recorder.phase = Phase.OPTIMIZER
            optimizer.step()
            state = list(_state_tensors(optimizer, param_names))
            _categorise(recorder, grads, state, phase_end["forward"])
            del grads, state
            optimizer.zero_grad(set_to_none=True)
            phase_end["optimizer"] = recorder.clock_ns
            say(f"optimizer: {len(recorder.ops)} ops in {time.perf_counter() - started:.1f} s")
    finally:
        for hook in hooks:
            hook.remove()
        recorder.close()
    return _to_trace(recorder, workload, phase_end)


def _categorise(recorder, grads, state, forward_end):
    """Categories that only the end of a phase reveals."""
    for name, grad in grads.items():
        block = recorder.block_of(grad)
        if block is not None:
            recorder.blocks[block].category = Category.GRADIENT
            recorder.blocks[block].label = f"grad:{name}"
    for label, tensor in state:
        if recorder.is_device_tensor(tensor):
            block = recorder.block_of(tensor)
            if block is not None:
                recorder.blocks[block].category = Category.OPTIMIZER_STATE
                recorder.blocks[block].label = label
    # What the forward pass made and the backward pass still needs is an activation; what it
    # made and dropped before the forward pass ended was a temporary.
    for block, phase in zip(recorder.blocks, recorder.block_phase):
        if phase == Phase.FORWARD and block.category == Category.TEMPORARY:
            if block.free_ns == NEVER or block.free_ns > forward_end:
                block.category = Category.ACTIVATION


def _to_trace(recorder, workload, phase_end):
    end = recorder.clock_ns
    trace = Trace(source="capture")
    trace.model = workload.description
    trace.blocks = recorder.blocks
    trace.ops = recorder.ops
    trace.iterations = [Iteration(index=0, start_ns=0, end_ns=end, first_op=0, end_op=len(trace.ops))]
    trace.metadata = {
        "capture_device": str(recorder.device),
        "torch_version": torch.__version__,
        "forward_end_ns": str(phase_end.get("forward", end)),
        "backward_end_ns": str(phase_end.get("backward", end)),
        "skipped_view_ops": str(recorder.counts["view_ops"]),
        "skipped_host_ops": str(recorder.counts["host_ops"]),
        "skipped_allocation_ops": str(recorder.counts["allocation_ops"]),
        # Each foreach op recorded as the kernels a GPU runs it as (multi_tensor.py).
        "foreach": "launches" if recorder.foreach_launches else "whole",
        "foreach_ops": str(recorder.counts["foreach_ops"]),
        "foreach_launches": str(recorder.counts["foreach_launches"]),
        "durations": "estimated",
    }
    return trace
