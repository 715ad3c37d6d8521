"""Routing PyTorch's CUDA allocations through DELTA: for the whole process (enable) or for one
scope (pool). torch is imported here lazily so that the rest of the package works without it."""

import contextlib
import threading

from . import _native
from .errors import AllocatorAlreadyInitializedError, DeltaError

ALLOC_FUNCTION = "delta_malloc"
FREE_FUNCTION = "delta_free"

_lock = threading.RLock()
_pluggable = None       # the one CUDAPluggableAllocator of this process
_enabled = False        # change_current_allocator succeeded
_pools = {}             # device index -> torch.cuda.MemPool backed by DELTA

_ALREADY_INITIALIZED = (
    "DELTA cannot replace PyTorch's CUDA allocator: {why}. PyTorch lets the allocator be "
    "swapped only before it is first used, so delta_torch.enable() must run before the first "
    "CUDA tensor, torch.cuda.init() or any other CUDA call in this process. Call it right after "
    "`import torch`, or set DELTA_ENABLE=1 in the environment so that it runs at interpreter "
    "start-up. To route only part of a program through DELTA, use `with delta_torch.pool():`."
)


def _import_torch():
    try:
        import torch
    except ImportError as error:
        raise DeltaError(f"delta_torch needs PyTorch for this call: {error}") from None
    if not hasattr(torch.cuda, "memory") or not hasattr(torch.cuda.memory, "CUDAPluggableAllocator"):
        raise DeltaError(f"PyTorch {torch.__version__} has no CUDAPluggableAllocator; 2.5 or newer is needed")
    return torch


def cuda_already_initialized(torch):
    """True when PyTorch's CUDA state, and so its native allocator, has been set up.

    torch.cuda.is_initialized() turns true at CUDA's lazy initialisation, which also initialises
    the native caching allocator; the first CUDA tensor always goes through it."""
    return bool(torch.cuda.is_initialized())


def _pluggable_allocator(torch):
    global _pluggable
    if _pluggable is None:
        _, path, _ = _native.load()  # same path and instance as the control calls
        _pluggable = torch.cuda.memory.CUDAPluggableAllocator(path, ALLOC_FUNCTION, FREE_FUNCTION)
    return _pluggable


def enable():
    """Make DELTA the allocator of every CUDA tensor in this process. Idempotent.

    Must run before CUDA is first used; otherwise AllocatorAlreadyInitializedError explains why.
    Returns the torch.cuda.memory.CUDAPluggableAllocator that was installed."""
    global _enabled
    with _lock:
        if _enabled:
            return _pluggable
        torch = _import_torch()
        if cuda_already_initialized(torch):
            raise AllocatorAlreadyInitializedError(
                _ALREADY_INITIALIZED.format(why="CUDA was already initialized in this process")
            )
        allocator = _pluggable_allocator(torch)
        try:
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as error:
            if "already initialized" in str(error):
                raise AllocatorAlreadyInitializedError(
                    _ALREADY_INITIALIZED.format(
                        why="the current allocator was already initialized (CUDA was used, or "
                        f"another allocator was installed first; PyTorch says: {error})"
                    )
                ) from error
            raise DeltaError(f"change_current_allocator rejected DELTA: {error}") from error
        _enabled = True
        return allocator


def is_enabled():
    """Whether enable() installed DELTA as this process's allocator."""
    return _enabled


@contextlib.contextmanager
def pool(device=None):
    """Route the CUDA allocations of this thread inside the `with` block through DELTA.

    Uses one torch.cuda.MemPool per device backed by DELTA, kept for the life of the process so
    that tensors allocated in the scope may outlive it. Yields that MemPool, or None when
    enable() already routes every allocation through DELTA (PyTorch's pluggable allocator
    cannot host pools, and there is nothing left to route)."""
    torch = _import_torch()
    if _enabled:
        yield None
        return
    if not torch.cuda.is_available():
        raise DeltaError(
            "delta_torch.pool() needs a CUDA device, and torch.cuda.is_available() is False"
        )
    index = torch.cuda.current_device() if device is None else torch.cuda._utils._get_device_index(device)
    with _lock:
        mem_pool = _pools.get(index)
        if mem_pool is None:
            mem_pool = torch.cuda.MemPool(_pluggable_allocator(torch).allocator())
            _pools[index] = mem_pool
    with torch.cuda.use_mem_pool(mem_pool, device=index):
        yield mem_pool
