"""Records one training iteration of a PyTorch model as a DELTA access trace, without a GPU.

Every aten op is seen through a TorchDispatchMode with its input and output tensors. A block is
a tensor storage: views share their base's block, so a block's size is the storage's size and
an op touches it through any view. Storages are keyed by their StorageImpl address while alive
(meta tensors have no data pointer) and a weakref.finalize on the storage object marks the
moment the storage dies, which is the block's free time. In-place ops and out= arguments are
recognised from the op schema (alias_info.is_write), not from names, so relu_, add_, copy_,
the optimizer's _foreach_*_ ops and BatchNorm's running-stat updates all count as writes.

Time is virtual: ops run back to back on stream 0, each lasting what the cost model estimates.
Ops that launch no kernel on a GPU are not recorded as ops: views and other metadata-only ops
(outputs alias inputs, nothing written), allocations without initialisation (empty*), and ops
on host tensors only. Their storages still become blocks when they are device storages.
"""

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

try:
    from torch.utils.flop_counter import flop_registry
except ImportError:  # older torch: FLOPs of matmuls and convolutions unknown, elementwise guess only
    flop_registry = {}

import multi_tensor
import paths  # noqa: F401
from delta_trace import NEVER, Access, Block, Category, Op, OpKind, Phase
_ALLOCATION_ONLY = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                    "aten::new_empty_strided", "aten::empty_permuted"}


def _tensors(value):
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def op_name(func):
    schema = func._schema
    return schema.name if schema.overload_name in ("", "default") else f"{schema.name}.{schema.overload_name}"


def _schema_arguments(func, args, kwargs):
    """Each argument of the op's schema with the value the call passed for it (None if none)."""
    positional = 0
    for argument in func._schema.arguments:
        if argument.kwarg_only:
            value = kwargs.get(argument.name)
        else:
            value = args[positional] if positional < len(args) else kwargs.get(argument.name)
            positional += 1
        yield argument, value


def _written_arguments(func, args, kwargs):
    """Tensors the op writes, each with whether it is write-only (an out= argument)."""
    written = []
    for argument, value in _schema_arguments(func, args, kwargs):
        info = argument.alias_info
        if info is not None and info.is_write and value is not None:
            write_only = bool(getattr(argument, "is_out", False))
            written.extend((t, write_only) for t in _tensors(value))
    return written


def _extent_bytes(t):
    return t.numel() * t.element_size()


class _Storage:
    __slots__ = ("key", "obj", "nbytes")

    def __init__(self, tensor):
        self.obj = tensor.untyped_storage()
        self.key = self.obj._cdata
        self.nbytes = self.obj.nbytes()


class CaptureRecorder(TorchDispatchMode):
    """Use as a context manager around the iteration; set `phase` as it moves on."""

    def __init__(self, device, estimate_ns, foreach_launches=True):
        super().__init__()
        self.foreach_launches = foreach_launches  # split foreach ops into their launches
        self.device = torch.device(device)
        self.estimate_ns = estimate_ns  # (flops, bytes, dtype, OpKind) -> ns
        self.clock_ns = 0
        self.phase = Phase.UNKNOWN
        self.blocks = []          # delta_trace.Block, id == index
        self.block_phase = []     # phase in which each block appeared
        self.ops = []
        self.live = {}            # storage key -> block id
        self.closed = False
        self.module_path = []     # forward-hook stack of qualified module names
        self.counts = {"view_ops": 0, "host_ops": 0, "allocation_ops": 0, "foreach_ops": 0, "foreach_launches": 0}
        self._in_op = False
        self._freed_in_op = []

    # --- blocks -----------------------------------------------------------------------------
    def is_device_tensor(self, t):
        return t.device.type == self.device.type

    def track(self, tensor, category, label, alloc_ns=NEVER):
        """The block of a tensor's storage, created when the storage is new."""
        storage = _Storage(tensor)
        if storage.key in self.live:
            return self.live[storage.key]
        if storage.nbytes == 0:
            return None
        block_id = len(self.blocks)
        self.blocks.append(Block(id=block_id, size=storage.nbytes, address=0, stream=0,
                                           alloc_ns=alloc_ns, free_ns=NEVER, category=category,
                                           label=label))
        self.block_phase.append(self.phase if alloc_ns != NEVER else "before")
        self.live[storage.key] = block_id
        weakref.finalize(storage.obj, self._storage_died, storage.key, block_id)
        return block_id

    def block_of(self, tensor):
        return self.live.get(tensor.untyped_storage()._cdata)

    def _storage_died(self, key, block_id):
        if self.closed:
            return
        if self.live.get(key) == block_id:
            del self.live[key]
        if self._in_op:
            self._freed_in_op.append(block_id)
        else:
            self.blocks[block_id].free_ns = self.clock_ns

    def close(self):
        """Stop listening to storage deaths: what dies after the iteration stays live in the trace."""
        self.closed = True

    # --- ops --------------------------------------------------------------------------------
    def _label(self, name):
        if self.module_path and self.phase == Phase.FORWARD:
            return f"{self.module_path[-1]}:{name}"
        return f"{self.phase.name.lower()}:{name}"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        written = {id(t): write_only for t, write_only in _written_arguments(func, args, kwargs)}
        inputs = _tensors((args, kwargs))
        start = self.clock_ns
        self._in_op = True
        try:
            out = func(*args, **kwargs)
        finally:
            self._in_op = False
        outputs = _tensors(out)

        device_inputs = [t for t in inputs if self.is_device_tensor(t)]
        device_outputs = [t for t in outputs if self.is_device_tensor(t)]
        host_inputs = [t for t in inputs if not self.is_device_tensor(t)]
        host_outputs = [t for t in outputs if not self.is_device_tensor(t)]

        uses = {}  # block id -> set of accesses, in first-seen order
        for t in device_inputs:
            block = self.block_of(t)
            if block is None:
                block = self.track(t, Category.UNKNOWN, f"untracked:{tuple(t.shape)}")
                if block is None:
                    continue
            write_only = written.get(id(t))
            access = {Access.READ} if write_only is None else \
                ({Access.WRITE} if write_only else {Access.READ, Access.WRITE})
            uses.setdefault(block, set()).update(access)
        new_blocks = []
        for t in device_outputs:
            block = self.block_of(t)
            if block is None:
                block = self.track(t, Category.TEMPORARY, self._label(name), alloc_ns=start)
                if block is None:
                    continue
                new_blocks.append(block)
                uses.setdefault(block, set()).add(Access.WRITE)
            elif block not in uses:
                uses[block] = {Access.WRITE}  # an output aliasing a storage the op was not given

        if not device_inputs and not device_outputs:
            self.counts["host_ops"] += 1
            self._settle_frees(start)
            return out
        if name in _ALLOCATION_ONLY:
            self.counts["allocation_ops"] += 1
            self._settle_frees(start)
            return out
        if not new_blocks and not written and not (device_inputs and host_outputs):
            self.counts["view_ops"] += 1
            self._settle_frees(start)
            return out

        kind = OpKind.OP
        if host_inputs and device_outputs and not device_inputs:
            kind = OpKind.COPY_H2D
        elif device_inputs and host_outputs and not device_outputs:
            kind = OpKind.COPY_D2H
        moved = sum(_extent_bytes(t) for t in {id(t): t for t in inputs + outputs}.values())
        flops = self._flops(func, args, kwargs, out, inputs + outputs)
        dtype = next((t.dtype for t in device_inputs + device_outputs if t.is_floating_point()), torch.float32)
        duration = self.estimate_ns(flops, moved, dtype, kind)
        parts = self._foreach_launches(func, args, kwargs, out, uses) if kind == OpKind.OP else None
        if parts is not None and duration < len(parts):
            parts = None  # too short to give every launch a nanosecond: kept whole
        if parts is None:
            parts = [(1.0, list(uses))]
        else:
            self.counts["foreach_ops"] += 1
            self.counts["foreach_launches"] += len(parts)
        clock, done = start, 0.0
        spare = duration - len(parts)  # past one nanosecond each
        for k, (share, launch_blocks) in enumerate(parts):
            # Each launch lasts a nanosecond and its share of the rest of the op's estimate; the
            # last ends where the op would.
            done += share
            end = start + duration if k == len(parts) - 1 else start + k + 1 + round(spare * done)
            op = Op(id=len(self.ops), name=name, kind=kind, stream=0, start_ns=clock,
                    duration_ns=end - clock, duration_estimated=True, iteration=0,
                    phase=self.phase, flops=float(flops) * (end - clock) / duration if duration else float(flops),
                    bytes=moved if kind in (OpKind.COPY_H2D, OpKind.COPY_D2H) else 0)
            op.blocks = [(b, a) for b in launch_blocks for a in (Access.READ, Access.WRITE) if a in uses[b]]
            self.ops.append(op)
            clock = end
        self.clock_ns = start + duration
        self._settle_frees(self.clock_ns)
        return out

    def _foreach_launches(self, func, args, kwargs, out, uses):
        """A foreach op's kernel launches on a GPU (multi_tensor.py): (share of the op's time,
        blocks it uses) each, in order; None for any other op, or one multi_tensor_apply would
        not run (lists of unequal lengths or shapes, mixed dtypes: PyTorch's per-tensor path)."""
        if not self.foreach_launches or not func._schema.name.startswith("aten::_foreach_"):
            return None
        lists, others, scalar_list = [], [], False
        for argument, value in _schema_arguments(func, args, kwargs):
            kind = str(argument.type)
            if kind.startswith("List[Tensor]") or kind.startswith("Tensor[]"):
                lists.append(list(value or []))
            elif isinstance(value, torch.Tensor):
                others.append(value)
            if kind.startswith("List[number]") or argument.name == "scalars":
                scalar_list = True  # a tensor of scalars too: ATen reads it into a list first
        results = out if isinstance(out, (list, tuple)) and out and all(isinstance(t, torch.Tensor) for t in out) else []
        if results and lists and not any(t is results[0] for t in lists[0]):
            lists.append(list(results))
        if not lists or not lists[0] or len(lists) > len(multi_tensor.MAX_TENSORS):
            return None
        first = lists[0]
        tensors = [t for tensor_list in lists for t in tensor_list]
        if any(len(tensor_list) != len(first) for tensor_list in lists) or \
                any(lists[d][i].numel() != first[i].numel() for d in range(len(lists)) for i in range(len(first))) or \
                len({t.dtype for t in tensors}) != 1 or not all(self.is_device_tensor(t) for t in tensors):
            return None
        launches = multi_tensor.launches([t.numel() for t in first], len(lists), scalar_list)
        if len(launches) <= 1:
            return None
        total = sum(elements for launch in launches for _, elements in launch)
        shared = [b for b in (self.block_of(t) for t in others if self.is_device_tensor(t)) if b is not None]
        parts = []
        for launch in launches:
            blocks = list(dict.fromkeys(shared + [b for index, _ in launch for d in range(len(lists))
                                                  for b in [self.block_of(lists[d][index])] if b is not None]))
            parts.append((sum(elements for _, elements in launch) / total, blocks))
        # What no launch reads (an empty tensor's storage) is the first launch's, so that no use is lost.
        covered = {b for _, blocks in parts for b in blocks}
        parts[0][1].extend(b for b in uses if b not in covered)
        return parts

    def _settle_frees(self, when):
        for block_id in self._freed_in_op:
            self.blocks[block_id].free_ns = when
        self._freed_in_op.clear()

    @staticmethod
    def _flops(func, args, kwargs, out, tensors):
        counter = flop_registry.get(func.overloadpacket)
        if counter is not None:
            try:
                return float(counter(*args, **kwargs, out_val=out))
            except Exception:  # a counter that does not know this overload: fall back below
                pass
        # Elementwise and reduction ops: about one operation per element of the largest tensor.
        return float(max((t.numel() for t in tensors), default=0))
