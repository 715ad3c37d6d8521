"""Roofline cost model: an estimate of an op's GPU time when the trace did not measure it.

    time = max(flops / peak_flops, bytes / memory_bandwidth) + launch_latency

Copies between host and device use the PCIe rate instead of the memory bandwidth. The GPU
figures are those of device/gpu_profiles.cpp (the simulated devices), so that estimated
and simulated times agree. FLOP counts come from the op name and tensor shapes when the source
has them (PyTorch Execution Traces do); otherwise an op counts as memory-bound.
"""

import math
from dataclasses import dataclass

MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class GpuProfile:
    name: str
    memory_bytes: int
    pcie_bytes_per_s: float
    hbm_bytes_per_s: float
    launch_latency_ns: float
    fp32_flops: float
    fp16_flops: float


# Same numbers as device/gpu_profiles.cpp.
PROFILES = {
    "h200": GpuProfile("h200", 143770 * MIB, 55e9, 4.8e12, 4000, 67e12, 989e12),
    "a100": GpuProfile("a100", 80 * GIB, 25e9, 2.0e12, 4000, 19.5e12, 312e12),
    "v100": GpuProfile("v100", 32 * GIB, 12e9, 900e9, 5000, 15.7e12, 125e12),
    "titanv": GpuProfile("titanv", 12 * GIB, 12e9, 653e9, 5000, 14.9e12, 110e12),
}


def profile(name):
    key = (name or "").lower()
    if key not in PROFILES:
        raise ValueError(f"unknown GPU profile '{name}' (known: {', '.join(PROFILES)})")
    return PROFILES[key]


def estimate_ns(gpu, flops=0.0, bytes_moved=0, half_precision=False, transfer=None):
    """Estimated duration in integer nanoseconds. transfer: None (a kernel), "h2d" or "d2h"."""
    if transfer in ("h2d", "d2h"):
        seconds = bytes_moved / gpu.pcie_bytes_per_s
    else:
        peak = gpu.fp16_flops if half_precision else gpu.fp32_flops
        seconds = max(flops / peak, bytes_moved / gpu.hbm_bytes_per_s)
    return int(math.ceil(seconds * 1e9 + gpu.launch_latency_ns))


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _is_shape(value):
    return isinstance(value, list) and all(isinstance(d, int) for d in value)


def count_flops(name, input_shapes, output_shapes):
    """FLOPs of an aten op from its shapes (lists of ints; other entries ignored). Convolutions
    and matrix products count 2 per multiply-add; everything else one per output element."""
    inputs = [s for s in input_shapes if _is_shape(s)]
    outputs = [s for s in output_shapes if _is_shape(s)]
    out_elements = max((_numel(s) for s in outputs), default=0)
    base = name.split("::")[-1]
    if "convolution_backward" in base and len(inputs) >= 3 and len(inputs[2]) >= 3:
        weight = inputs[2]
        # grad_output numel x (Cin/groups x kernel) for each of grad_input and grad_weight.
        return 4.0 * _numel(inputs[0]) * _numel(weight[1:])
    if "conv" in base and len(inputs) >= 2 and len(inputs[1]) >= 3:
        return 2.0 * out_elements * _numel(inputs[1][1:])
    if base in ("mm", "bmm", "matmul", "addmm", "baddbmm", "linear"):
        first = inputs[1] if base in ("addmm", "baddbmm") and len(inputs) >= 3 else (inputs[0] if inputs else [])
        k = first[-1] if first else 0
        return 2.0 * out_elements * k
    return float(max(out_elements, max((_numel(s) for s in inputs), default=0)))
