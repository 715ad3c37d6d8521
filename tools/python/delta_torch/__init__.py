"""delta_torch: run PyTorch's CUDA allocations on DELTA (libdelta.so).

    import torch, delta_torch
    delta_torch.enable()              # every CUDA tensor of the process, before CUDA is used
    with delta_torch.pool(): ...      # or only the allocations made inside a scope
    delta_torch.stats()               # DELTA's statistics (PyTorch's memory_stats do not apply)

Importing this package does not import torch; only enable() and pool() do.
"""

import json

from . import _native
from ._allocator import enable, is_enabled, pool
from ._library import find_library
from .errors import (
    AllocatorAlreadyInitializedError,
    DeltaError,
    InvariantViolationError,
    LibraryNotFoundError,
)

__version__ = "0.1.0"

__all__ = [
    "AllocatorAlreadyInitializedError",
    "DeltaError",
    "InvariantViolationError",
    "LibraryNotFoundError",
    "check_invariants",
    "dump",
    "empty_cache",
    "enable",
    "find_library",
    "is_enabled",
    "last_error",
    "library_path",
    "pool",
    "reset_peak_stats",
    "stats",
    "step",
    "trace_dump",
    "version",
]


def library_path():
    """Path of the libdelta.so this process uses (opening it if needed)."""
    return _native.load()[1]


def stats():
    """DELTA's allocator statistics as a dict, parsed from delta_stats_json()."""
    return json.loads(_native.stats_json())


def reset_peak_stats():
    """Reset the peak counters to the current values."""
    _native.reset_peak_stats()


def empty_cache():
    """Release every cached page no live block uses (DELTA's torch.cuda.empty_cache)."""
    _native.empty_cache()


def dump(path):
    """Write DELTA's JSON dump (settings, statistics, segments, event history) to path,
    atomically. Returns path."""
    _native.dump(path)
    return path


def step():
    """Mark the end of a training step. With DELTA_MODE=record the trace is split into
    iterations here (instead of being guessed from the repeating kernels), and written once
    DELTA_RECORD_ITERATIONS steps are recorded. Does nothing in other modes."""
    _native.step()


def trace_dump(path=None):
    """End the recording (DELTA_MODE=record) and write the trace to path, or to DELTA_TRACE
    when path is None. Returns the path given."""
    _native.trace_dump(path)
    return path


def check_invariants():
    """Verify every invariant of the allocator's state; raises InvariantViolationError."""
    _native.check_invariants()


def last_error():
    """The calling thread's last DELTA error message, "" if none."""
    return _native.last_error()


def version():
    """Version of the loaded libdelta.so."""
    return _native.version()
