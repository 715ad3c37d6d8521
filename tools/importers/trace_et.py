"""Import a PyTorch Execution Trace (Chakra JSON, schema 1.0.x or 1.1.x), optionally joined
with a Kineto profile of the same run, as a DELTA access trace.

Ops: the ET's leaf operators (operators with no operator beneath them: the ones that launch
kernels) that touch at least one CUDA tensor, in the order they started (rf_id).
Blocks: CUDA storages. An ET tensor is [tensor_id, storage_id, offset, numel, itemsize, device];
a storage's size is the largest (offset + numel) * itemsize seen on it.
Reads: the storages of the op's input tensors. Writes: storages of output tensors that are not
also inputs (fresh results), and inputs that the op schema marks as mutated (`Tensor(a!)`); a
view returned on an input's storage (`Tensor(a)`) writes nothing.
Lifetimes: the ET records no allocations or frees. A storage first read is live before the
trace and stays live (category parameter, or optimizer_state when first used by the optimizer);
a storage first written is allocated when that op starts and freed when its last use ends.
Phase: backward for ops under the autograd engine (its own thread), optimizer under
`Optimizer.*` annotations, forward otherwise (unknown under the DataLoader).
Times: ops are laid end to end (GPU busy time, host gaps removed). Durations are the op's GPU
work in the Kineto profile (kernels, memcpys and memsets launched by it or by ops it called),
the median over every profiled iteration whose operator sequence matches the ET's. Ops the
profile does not cover get the cost model's estimate (duration_estimated).
"""

import bisect
import gzip
import json
import math
import re
import statistics
import sys
from collections import defaultdict

import cost_model
import delta_trace as dt
from import_checks import checked
from alloc_stream import ImportError_

ATTR_FIELDS = ("rf_id", "tid", "op_schema", "seq_id", "fw_parent", "scope")
GPU_ACTIVITY = ("kernel", "gpu_memcpy", "gpu_memset")


def load_json(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return json.loads(data)
    except (OSError, EOFError, gzip.BadGzipFile, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ImportError_(f"{path}: cannot read JSON: {e}") from None


def _normalize(node, index):
    """One node in the 1.0.1 layout, whatever the schema; fields of the wrong type refused."""
    try:
        if "ctrl_deps" in node:  # 1.0.2-chakra and later
            attrs = {a["name"]: a.get("value") for a in node.get("attrs", [])}
            out = {"id": node["id"], "name": node["name"], "parent": node["ctrl_deps"],
                   "rf_id": attrs.get("rf_id", node["id"]), "tid": attrs.get("tid", 0),
                   "op_schema": attrs.get("op_schema", "") or "",
                   "inputs": node["inputs"]["values"], "input_types": node["inputs"]["types"],
                   "input_shapes": node["inputs"]["shapes"], "outputs": node["outputs"]["values"],
                   "output_types": node["outputs"]["types"], "output_shapes": node["outputs"]["shapes"]}
        else:
            out = {"id": node["id"], "name": node["name"], "parent": node["parent"],
                   "rf_id": node.get("rf_id", node["id"]), "tid": node.get("tid", 0),
                   "op_schema": node.get("op_schema", "") or "",
                   "inputs": node["inputs"], "input_types": node["input_types"], "input_shapes": node["input_shapes"],
                   "outputs": node["outputs"], "output_types": node["output_types"],
                   "output_shapes": node["output_shapes"]}
    except (KeyError, TypeError, AttributeError) as e:
        raise ImportError_(f"nodes[{index}]: not an execution-trace node (missing {e})") from None
    for field in ("id", "parent", "rf_id"):
        if not isinstance(out[field], int) or isinstance(out[field], bool):
            raise ImportError_(f"nodes[{index}]: {field} is not an integer: {out[field]!r}")
    for field in ("name", "op_schema"):
        if not isinstance(out[field], str):
            raise ImportError_(f"nodes[{index}]: {field} is not a string: {out[field]!r}")
    return out


def _tensors(values, types, where):
    """The tensor tuples among an op's arguments, GenericLists included. A value typed Tensor
    that is a list but not a 6-tuple is refused: dropping it would lose the op's blocks."""
    if not isinstance(values, list) or not isinstance(types, list) or len(values) != len(types):
        raise ImportError_(f"{where}: {len(values) if isinstance(values, list) else 'no'} argument values "
                           f"for {len(types) if isinstance(types, list) else 'no'} types")
    out = []
    for value, kind in zip(values, types):
        if not isinstance(kind, str):
            continue
        if kind.startswith("Tensor") and isinstance(value, list):
            if len(value) != 6:
                raise ImportError_(f"{where}: tensor {value!r} is not [tensor_id, storage_id, offset, numel, "
                                   f"itemsize, device]")
            out.append(value)
        elif kind.startswith("GenericList[") and isinstance(value, list):
            inner = kind[len("GenericList["):-1].split(",")
            if len(inner) == len(value):
                out.extend(_tensors(value, inner, where))
            elif any(k.startswith("Tensor") for k in inner):
                raise ImportError_(f"{where}: {kind} holds {len(value)} values")
    return out


def _storages(tensors, where, device_prefix):
    """[(storage id, bytes)] of the tensors on the planned device, in argument order."""
    out = []
    for t in tensors:
        _, storage, offset, numel, itemsize, device = t
        if not isinstance(device, str) or not device.startswith(device_prefix):
            continue
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (storage, offset, numel, itemsize)) \
                or min(offset, numel, itemsize) < 0:
            raise ImportError_(f"{where}: malformed tensor {t!r} (sizes must be whole numbers, not negative)")
        if numel > 0:
            out.append((storage, (offset + numel) * itemsize))
    return out


def _planned_device(leaves, path):
    """'cuda', or 'cpu' for a capture made without a GPU: its CPU tensors are planned as if they
    were on the GPU (a what-if), since they are the same tensors a GPU run would allocate."""
    devices = set()
    for node in leaves:
        where = f"{path}: node {node['id']} ({node['name']})"
        for t in _tensors(node["inputs"], node["input_types"], where) + \
                _tensors(node["outputs"], node["output_types"], where):
            if isinstance(t[5], str):
                devices.add(t[5].split(":")[0])
    if "cuda" in devices:
        return "cuda"
    if "cpu" in devices:
        return "cpu"
    raise ImportError_(f"{path}: no operator touches a tensor on cuda or cpu (devices seen: "
                       f"{', '.join(sorted(d for d in devices if d)) or 'none'})")


def _mutates(op_schema):
    return "!" in op_schema


def _phase(node, nodes, thread_roots):
    phase = dt.Phase.FORWARD
    seen = 0
    current = node
    while current is not None and seen < 10000:
        name = current["name"]
        if name.startswith("Optimizer."):
            return dt.Phase.OPTIMIZER
        if name.startswith("autograd::engine::evaluate_function"):
            phase = dt.Phase.BACKWARD
        if name.startswith("enumerate(DataLoader)"):
            return dt.Phase.UNKNOWN
        parent = nodes.get(current["parent"])
        current = parent if parent is not current else None
        seen += 1
    return phase


class _Generation:
    """One lifetime of an ET storage id."""
    __slots__ = ("storage", "alloc_op", "phase", "size", "last_end", "block_id")

    def __init__(self, storage, alloc_op, phase):
        self.storage = storage
        self.alloc_op = alloc_op  # None: live before the trace
        self.phase = phase
        self.size = 0
        self.last_end = 0
        self.block_id = None


class _KinetoTimes:
    """GPU time of each ET operator, from a Kineto profile, matched by op order per iteration."""

    def __init__(self, kineto, et_ops):
        events = kineto.get("traceEvents") if isinstance(kineto, dict) else None
        if not isinstance(events, list):
            raise ImportError_("Kineto profile has no traceEvents list")
        gpu_us = defaultdict(float)  # correlation id -> GPU microseconds
        launches = defaultdict(list)  # thread -> [(ts, correlation)] of CUDA runtime calls
        cpu_ops = []
        for e in events:
            if not isinstance(e, dict):
                continue
            cat = e.get("cat")
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if cat in GPU_ACTIVITY and "correlation" in args:
                gpu_us[args["correlation"]] += float(e.get("dur", 0) or 0)
            elif cat == "cuda_runtime" and "correlation" in args and isinstance(e.get("ts"), (int, float)):
                launches[e.get("tid")].append((e["ts"], args["correlation"]))
            elif cat == "cpu_op" and isinstance(e.get("ts"), (int, float)):
                cpu_ops.append(e)
        cpu_ops.sort(key=lambda e: (e["ts"], -float(e.get("dur", 0) or 0)))
        for tid in launches:
            launches[tid].sort()
        self.device = (kineto.get("deviceProperties") or [{}])[0] if isinstance(kineto, dict) else {}
        self.iterations = self._match(cpu_ops, et_ops)
        self.durations = {}  # ET node id -> median GPU ns
        for n, node in enumerate(et_ops):
            samples = []
            for match in self.iterations:
                e = cpu_ops[match[n]]
                # The GPU work of every launch the op made, itself or through ops nested in it:
                # the runtime calls on its thread inside its time span.
                calls = launches.get(e.get("tid"), [])
                lo = bisect.bisect_left(calls, (e["ts"], -math.inf))
                hi = bisect.bisect_right(calls, (e["ts"] + float(e.get("dur", 0) or 0), math.inf))
                samples.append(sum(gpu_us.get(c, 0.0) for _, c in calls[lo:hi]))
            if samples:
                self.durations[node["id"]] = int(round(statistics.median(samples) * 1000))

    @staticmethod
    def _match(cpu_ops, et_ops):
        """Each stretch of the profile that holds the ET's operators in order, with at most as many
        extra profiled ops (autograd nodes, ops the ET skips) as the ET has ops."""
        if not et_ops:
            return []
        names = [n["name"] for n in et_ops]
        budget = len(names)
        matches = []
        start = 0
        while start < len(cpu_ops):
            while start < len(cpu_ops) and cpu_ops[start].get("name") != names[0]:
                start += 1
            if start >= len(cpu_ops):
                break
            indices, pos, skipped = [], start, 0
            for name in names:
                while pos < len(cpu_ops) and cpu_ops[pos].get("name") != name and skipped <= budget:
                    pos += 1
                    skipped += 1
                if pos >= len(cpu_ops) or skipped > budget:
                    break
                indices.append(pos)
                pos += 1
            if len(indices) == len(names):
                matches.append(indices)
                start = pos
            else:
                start += 1
        return matches


def import_et_trace(path, kineto_path=None, gpu="titanv"):
    et = load_json(path)
    if not isinstance(et, dict) or not isinstance(et.get("nodes"), list) or "schema" not in et:
        raise ImportError_(f"{path}: not a PyTorch Execution Trace (needs 'schema' and 'nodes')")
    schema = str(et["schema"])
    if not re.match(r"^1\.[01]\.\d+", schema):
        raise ImportError_(f"{path}: execution trace schema {schema} is not supported (1.0.x and 1.1.x are)")
    profile = cost_model.profile(gpu)
    nodes = {}
    for index, raw in enumerate(et["nodes"]):
        node = _normalize(raw, index)
        nodes[node["id"]] = node
    operators = sorted((n for n in nodes.values() if n["op_schema"]), key=lambda n: n["rf_id"])
    has_operator_below = set()
    for n in operators:
        current, guard = nodes.get(n["parent"]), 0
        while current is not None and current["id"] not in has_operator_below and guard < 10000:
            has_operator_below.add(current["id"])
            parent = nodes.get(current["parent"])
            current = parent if parent is not current else None
            guard += 1
    leaves = [n for n in operators if n["id"] not in has_operator_below]
    if not leaves:
        raise ImportError_(f"{path}: the execution trace has no operator (no node with an op_schema)")
    planned_device = _planned_device(leaves, path)

    times = None
    if kineto_path is not None:
        times = _KinetoTimes(load_json(kineto_path), operators)
    if planned_device == "cpu":
        # A CPU capture's profile holds no GPU work, so its times say nothing of a GPU's.
        how = "estimated by the cost model for " + profile.name + " from each op's flops and bytes"
        if times is not None:
            how += " (the Kineto profile's CPU times are not GPU times and are not used)"
            times = None
        print(f"warning: {path}: every tensor is on the CPU; planned as if on the GPU (a what-if), "
              f"with durations {how}", file=sys.stderr)

    trace = dt.Trace(source="pytorch-et+kineto" if times else "pytorch-et")
    trace.metadata["path"] = str(path)
    trace.metadata["et_schema"] = schema
    if planned_device == "cpu":
        trace.metadata["what_if"] = "a CPU capture planned as if its tensors were on the GPU; durations estimated"
    if kineto_path is not None:
        trace.metadata["kineto_path"] = str(kineto_path)
        trace.metadata["kineto_iterations_matched"] = str(len(times.iterations))
    device = times.device if times else {}
    trace.gpu = dt.GpuInfo(name=str(device.get("name", "")), profile=profile.name,
                           memory_bytes=int(device.get("totalGlobalMem", 0) or 0))

    # The ET names storages by id, and an id comes back when its memory is reused; each time an
    # op returns a storage that is not among its inputs, a new block (a new allocation) starts.
    skipped = 0         # leaf operators that touch no tensor of the planned device
    current = {}        # storage id -> the _Generation now using it
    generations = []
    now = 0
    for node in leaves:
        where = f"{path}: node {node['id']} ({node['name']})"
        inputs = _tensors(node["inputs"], node["input_types"], where)
        reads = _storages(inputs, where, planned_device)
        outputs = _storages(_tensors(node["outputs"], node["output_types"], where), where, planned_device)
        if not reads and not outputs:
            # An operator on scalars, or on tensors of another device only: nothing for the
            # planner, and counted in the metadata rather than dropped unseen.
            skipped += 1
            continue
        read_ids = {s for s, _ in reads}
        phase = _phase(node, nodes, None)
        op = dt.Op(id=node["id"], name=node["name"], kind=dt.OpKind.OP, start_ns=now, phase=phase)
        input_devices = {t[5] for t in inputs if isinstance(t[5], str)}
        if planned_device == "cuda" and node["name"] == "aten::copy_" and any(d.startswith("cpu") for d in input_devices):
            op.kind = dt.OpKind.COPY_H2D
            op.bytes = sum(b for _, b in outputs)
        shapes_in = node["input_shapes"] if isinstance(node["input_shapes"], list) else []
        shapes_out = node["output_shapes"] if isinstance(node["output_shapes"], list) else []
        op.flops = cost_model.count_flops(node["name"], shapes_in, shapes_out)
        measured = times.durations.get(node["id"]) if times else None
        if measured is not None:
            op.duration_ns = measured
        else:
            moved = sum(b for _, b in reads) + sum(b for s, b in outputs if s not in read_ids or _mutates(node["op_schema"]))
            half = any(t[4] == 2 for t in inputs)
            op.duration_ns = cost_model.estimate_ns(profile, op.flops, moved, half,
                                                    "h2d" if op.kind == dt.OpKind.COPY_H2D else None)
            op.duration_estimated = True
        end = now + op.duration_ns

        def use(generation, access, nbytes):
            generation.size = max(generation.size, nbytes)
            generation.last_end = end
            if (generation, access) not in op.blocks:
                op.blocks.append((generation, access))

        for s, nbytes in reads:
            if s not in current:  # first seen being read: it existed before the trace
                current[s] = _Generation(s, None, phase)
                generations.append(current[s])
            use(current[s], dt.Access.READ, nbytes)
        for s, nbytes in outputs:
            if s not in read_ids:
                current[s] = _Generation(s, op, phase)
                generations.append(current[s])
                use(current[s], dt.Access.WRITE, nbytes)
            elif _mutates(node["op_schema"]):
                use(current[s], dt.Access.WRITE, nbytes)
            else:
                use(current[s], dt.Access.READ, nbytes)  # a view on an input: nothing written
        trace.ops.append(op)
        now = end

    for new_id, generation in enumerate(generations):
        block = dt.Block(id=new_id, size=generation.size, label=f"storage {generation.storage}")
        if generation.alloc_op is None:
            block.category = (dt.Category.OPTIMIZER_STATE if generation.phase == dt.Phase.OPTIMIZER
                              else dt.Category.PARAMETER)
        else:
            block.alloc_ns = generation.alloc_op.start_ns
            block.free_ns = generation.last_end
            block.category = dt.Category.ACTIVATION if generation.phase == dt.Phase.FORWARD else dt.Category.UNKNOWN
        generation.block_id = new_id
        trace.blocks.append(block)
    for op in trace.ops:
        op.blocks = [(generation.block_id, access) for generation, access in op.blocks]
    if not trace.ops:
        raise ImportError_(f"{path}: no operator of the execution trace touches a {planned_device} tensor: no ops")
    if not trace.blocks:
        raise ImportError_(f"{path}: the execution trace's tensors are all empty: no blocks")
    trace.iterations.append(dt.Iteration(0, 0, now, 0, len(trace.ops)))
    estimated = sum(1 for op in trace.ops if op.duration_estimated)
    trace.metadata["estimated_durations"] = str(estimated)
    trace.metadata["operators_without_tensors"] = str(skipped)
    return checked(trace, path)
