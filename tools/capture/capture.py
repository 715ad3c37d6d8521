#!/usr/bin/env python3
"""Capture one training iteration of a known model as a DELTA trace, without a GPU.

    capture.py --model gpt2-xl --batch 2 [--seq 1024] [--gpu h200] -o gpt2xl-b2.json.gz

The model is built from its configuration on the meta device (no memory, no weights
downloaded), trained for one untraced warm-up step, then one traced step: forward, backward,
AdamW, zero_grad. See docs/capture.md.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import paths  # noqa: E402,F401
import cost_model  # noqa: E402
import delta_trace  # noqa: E402

# What each profile's GPU calls itself, for the trace's gpu.name.
GPU_NAMES = {"h200": "NVIDIA H200", "a100": "NVIDIA A100-SXM4-80GB", "v100": "Tesla V100-SXM2-32GB",
             "titanv": "NVIDIA TITAN V"}


def make_estimator(gpu):
    """(flops, bytes, dtype, OpKind) -> nanoseconds from the project's roofline cost model.
    Half-precision ops get the tensor-core peak; host-device copies the PCIe rate."""
    import torch
    half = {torch.float16, torch.bfloat16}
    transfers = {delta_trace.OpKind.COPY_H2D: "h2d", delta_trace.OpKind.COPY_D2H: "d2h"}

    def estimate(flops, moved, dtype, kind):
        return cost_model.estimate_ns(gpu, flops, moved, half_precision=dtype in half,
                                      transfer=transfers.get(kind))
    return estimate


def capture(model, batch, seq=None, gpu="h200", device="meta", warmup_steps=1, dtype="float32",
            progress=None, foreach="launches"):
    """The trace of one iteration of `model` (a name from models.BUILDERS)."""
    import torch

    import models
    from iteration import capture_iteration

    profile = cost_model.profile(gpu)
    say = progress or (lambda message: None)
    started = time.perf_counter()
    workload = models.build_workload(model, batch, seq, device)
    if dtype != "float32":
        workload.model.to(getattr(torch, dtype))
        workload.inputs = {k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v
                           for k, v in workload.inputs.items()}
    say(f"built {workload.description} on {device} in {time.perf_counter() - started:.1f} s")
    if foreach not in ("launches", "whole"):
        raise ValueError(f"foreach must be 'launches' or 'whole', not {foreach!r}")
    trace = capture_iteration(workload, make_estimator(profile), device=device,
                              warmup_steps=warmup_steps, progress=say, foreach_launches=foreach == "launches")
    trace.gpu = delta_trace.GpuInfo(GPU_NAMES.get(profile.name, profile.name), profile.name, profile.memory_bytes)
    trace.metadata["dtype"] = dtype
    trace.metadata["cost_model"] = f"roofline ({profile.name})"
    trace.metadata["capture_seconds"] = f"{time.perf_counter() - started:.2f}"
    return trace


def main(argv=None):
    import models
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, choices=sorted(models.BUILDERS))
    parser.add_argument("--batch", required=True, type=int)
    parser.add_argument("--seq", type=int, help="sequence length (transformers; default 1024 GPT-2, 512 BERT)")
    parser.add_argument("--gpu", default="h200", choices=sorted(cost_model.PROFILES), help="profile for durations")
    parser.add_argument("--device", default="meta", choices=["meta", "cpu"],
                        help="where the model lives while traced (cpu only for small sizes)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--warmup-steps", type=int, default=1)
    parser.add_argument("--foreach", default="launches", choices=["launches", "whole"],
                        help="an optimizer's foreach op as the kernels a GPU launches for it (default), "
                             "or as one op (traces made before 2026-12-05)")
    parser.add_argument("-o", "--output", required=True, help="trace file (.json or .json.gz)")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    say = (lambda m: None) if args.quiet else (lambda m: print(f"capture: {m}", file=sys.stderr, flush=True))
    try:
        trace = capture(args.model, args.batch, args.seq, args.gpu, args.device, args.warmup_steps,
                        args.dtype, progress=say, foreach=args.foreach)
        delta_trace.write(trace, args.output)
    except (ValueError, RuntimeError, OSError, delta_trace.TraceError) as e:
        print(f"capture: error: {e}", file=sys.stderr)
        return 1
    say(f"wrote {args.output}: {len(trace.ops)} ops, {len(trace.blocks)} blocks, "
        f"peak {delta_trace.peak_live(trace)[0] / 2**30:.2f} GiB live, {trace.metadata['capture_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
