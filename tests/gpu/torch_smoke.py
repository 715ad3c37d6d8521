#!/usr/bin/env python3
"""PyTorch smoke test of DELTA on a real GPU.

Trains the same small network for a few steps three times, each in its own process:

  native     PyTorch's own caching allocator (the reference)
  pluggable  DELTA through torch.cuda.memory.CUDAPluggableAllocator(libdelta.so,
             "delta_malloc", "delta_free") + change_current_allocator
  preload    LD_PRELOAD=libdelta.so with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
             so PyTorch's cudaMallocAsync/cudaFreeAsync calls land in DELTA

Every loss and the final weights must be bitwise identical to the native run: an allocator
changes where tensors live, never what is computed. Prints peak memory (PyTorch's counters and
DELTA's own, read with delta_stats_json through ctypes) and the median step time per mode.
Exits nonzero on any mismatch or failed run.

usage: torch_smoke.py --lib build-gpu/src/libdelta.so [--steps 40] [--json summary.json]
"""
import argparse
import ctypes
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("native", "pluggable", "preload")


# --------------------------------------------------------------------------------------------
# worker: one training run in this process
# --------------------------------------------------------------------------------------------

def delta_stats(library):
    lib = ctypes.CDLL(library)
    lib.delta_stats_json.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.delta_stats_json.restype = ctypes.c_int
    needed = lib.delta_stats_json(None, 0)
    if needed <= 0:
        lib.delta_last_error.restype = ctypes.c_char_p
        raise RuntimeError(f"delta_stats_json failed: {lib.delta_last_error().decode()}")
    buffer = ctypes.create_string_buffer(needed)
    if lib.delta_stats_json(buffer, needed) <= 0:
        raise RuntimeError("delta_stats_json failed on the second call")
    return json.loads(buffer.value.decode())


def build_model(torch):
    # Linear layers (cuBLAS), LayerNorm and GELU (elementwise and reduction kernels), a residual
    # connection, and a vocabulary-sized head for a cross-entropy loss.
    class Block(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.up = torch.nn.Linear(width, 4 * width)
            self.down = torch.nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    width, classes = 512, 1000
    return torch.nn.Sequential(
        torch.nn.Linear(256, width), Block(width), Block(width), Block(width),
        torch.nn.LayerNorm(width), torch.nn.Linear(width, classes)), classes


def run_worker(args):
    import torch  # imported here: the driver process never touches CUDA

    if args.worker == "pluggable":
        # Must happen before anything initializes CUDA in this process.
        allocator = torch.cuda.memory.CUDAPluggableAllocator(args.lib, "delta_malloc", "delta_free")
        torch.cuda.memory.change_current_allocator(allocator)

    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    device = torch.device("cuda", 0)
    model, classes = build_model(torch)
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    # Data made on the CPU from a fixed generator, so every mode sees the same bytes. Batch
    # sizes vary so the allocator sees changing request sizes, as in real jobs.
    generator = torch.Generator().manual_seed(99)
    batches = []
    for step in range(args.steps):
        rows = 192 + 64 * (step % 4)
        batches.append((torch.randn(rows, 256, generator=generator),
                        torch.randint(0, classes, (rows,), generator=generator)))

    losses, times = [], []
    for inputs, targets in batches:
        torch.cuda.synchronize()
        start = time.perf_counter()
        inputs = inputs.to(device, non_blocking=False)
        targets = targets.to(device, non_blocking=False)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())

    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().cpu().contiguous().numpy().tobytes())

    result = {
        "mode": args.worker,
        "losses": [value.hex() for value in losses],
        "final_loss": losses[-1],
        "weights_sha256": digest.hexdigest(),
        "median_step_s": statistics.median(times[min(5, len(times) - 1):]),
        "torch_peak_allocated": None,
        "torch_peak_reserved": None,
        "delta": None,
        "allocator_backend": torch.cuda.memory.get_allocator_backend(),
    }
    try:  # not available with a pluggable allocator
        result["torch_peak_allocated"] = torch.cuda.max_memory_allocated(device)
        result["torch_peak_reserved"] = torch.cuda.max_memory_reserved(device)
    except Exception:  # noqa: BLE001 - any failure just means "not reported"
        pass
    if args.worker != "native":
        result["delta"] = delta_stats(args.lib)
    with open(args.out, "w") as out:
        json.dump(result, out)
    return 0


# --------------------------------------------------------------------------------------------
# driver: three workers, then compare
# --------------------------------------------------------------------------------------------

def worker_env(mode, library):
    env = dict(os.environ)
    for key in ("LD_PRELOAD", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "DELTA_PRELOAD"):
        env.pop(key, None)
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # deterministic cuBLAS
    env["PYTHONHASHSEED"] = "0"
    if mode != "native":
        env["DELTA_DEVICE"] = "cuda"
    if mode == "preload":
        env["LD_PRELOAD"] = library
        env["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    return env


def run_mode(mode, args, scratch):
    out = os.path.join(scratch, f"{mode}.json")
    command = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--lib", args.lib,
               "--steps", str(args.steps), "--out", out]
    started = time.perf_counter()
    try:
        completed = subprocess.run(command, env=worker_env(mode, args.lib), capture_output=True,
                                   text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {args.timeout} s"
    elapsed = time.perf_counter() - started
    if completed.returncode != 0 or not os.path.exists(out):
        tail = "\n".join((completed.stdout + completed.stderr).strip().splitlines()[-25:])
        return None, f"exit code {completed.returncode} after {elapsed:.1f} s\n{tail}"
    with open(out) as result:
        return json.load(result), None


def mib(value):
    return "-" if value is None else f"{value / 2**20:,.1f}"


def compare(reference, result):
    """Problems of `result` against the native reference; empty when bitwise identical."""
    problems = []
    if result["losses"] != reference["losses"]:
        first = next(i for i, (a, b) in enumerate(zip(reference["losses"], result["losses"]))
                     if a != b) if len(result["losses"]) == len(reference["losses"]) else -1
        problems.append(f"losses differ from native (first at step {first}: "
                        f"{float.fromhex(result['losses'][first]) if first >= 0 else '?'} vs "
                        f"{float.fromhex(reference['losses'][first]) if first >= 0 else '?'})")
    if result["weights_sha256"] != reference["weights_sha256"]:
        problems.append("final weights differ from native")
    delta = result.get("delta")
    if delta is None or delta.get("alloc_count", 0) == 0:
        problems.append("DELTA served no allocation: the run did not go through DELTA")
    elif delta.get("device") != "cuda":
        problems.append(f"DELTA ran on device '{delta.get('device')}', not cuda")
    if result["mode"] == "preload" and result.get("allocator_backend") != "cudaMallocAsync":
        problems.append(f"PyTorch used backend {result.get('allocator_backend')}, "
                        "not cudaMallocAsync")
    return problems


def print_table(results, verdicts):
    native = results.get("native")
    header = (f"{'mode':<10} {'result':<10} {'final loss':>12} {'torch peak alloc':>17} "
              f"{'torch peak rsv':>15} {'DELTA peak alloc':>17} {'DELTA peak rsv':>15} "
              f"{'median step':>12} {'vs native':>10}")
    print("\n" + header)
    print("-" * len(header))
    for mode in MODES:
        result = results.get(mode)
        if result is None:
            print(f"{mode:<10} {verdicts[mode]:<10}  (no result)")
            continue
        delta = result.get("delta") or {}
        ratio = (f"{result['median_step_s'] / native['median_step_s']:.2f}x"
                 if native and native["median_step_s"] > 0 else "-")
        print(f"{mode:<10} {verdicts[mode]:<10} {result['final_loss']:>12.6f} "
              f"{mib(result['torch_peak_allocated']):>17} {mib(result['torch_peak_reserved']):>15} "
              f"{mib(delta.get('allocated_peak')):>17} {mib(delta.get('reserved_peak')):>15} "
              f"{result['median_step_s'] * 1e3:>9.2f} ms {ratio:>10}")
    print("(memory in MiB; 'identical' = every loss and the final weights bitwise equal to native)")


def run_driver(args):
    if not args.lib or not os.path.exists(args.lib):
        sys.exit(f"torch_smoke: --lib must name the built libdelta.so (got {args.lib!r})")
    args.lib = os.path.abspath(args.lib)
    results, verdicts, failures = {}, {}, []
    with tempfile.TemporaryDirectory() as scratch:
        for mode in MODES:
            print(f"torch_smoke: running {mode} ({args.steps} steps) ...", flush=True)
            result, error = run_mode(mode, args, scratch)
            if error:
                verdicts[mode] = "FAILED"
                failures.append(f"{mode}: the run failed: {error}")
                continue
            results[mode] = result
            verdicts[mode] = "reference" if mode == "native" else "identical"

    reference = results.get("native")
    for mode in MODES[1:]:
        if mode not in results:
            continue
        if reference is None:
            verdicts[mode] = "unchecked"
            continue
        problems = compare(reference, results[mode])
        if problems:
            verdicts[mode] = "MISMATCH"
            failures.extend(f"{mode}: {problem}" for problem in problems)

    print_table(results, verdicts)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"results": results, "verdicts": verdicts, "failures": failures}, out,
                      indent=2)
    if failures:
        print("\nTORCH SMOKE FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print("\ntorch smoke passed: DELTA's runs are bitwise identical to native")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", help="path of libdelta.so")
    parser.add_argument("--steps", type=int, default=40, help="training steps per mode")
    parser.add_argument("--timeout", type=int, default=120, help="seconds allowed per mode")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2")
    if args.worker:
        if not args.out:
            parser.error("--worker needs --out")
        return run_worker(args)
    return run_driver(args)


if __name__ == "__main__":
    sys.exit(main())
