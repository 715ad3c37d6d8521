"""ctypes binding of DELTA's C ABI (include/delta/delta.h).

The library is opened once per process by path. PyTorch's CUDAPluggableAllocator opens the same
path, and the dynamic loader hands both the same instance, so these calls see the allocator that
serves the tensors.
"""

import ctypes
import os
import threading

from ._library import find_library_with_origin
from .errors import DeltaError, InvariantViolationError

_lock = threading.Lock()
_loaded = None  # (ctypes.CDLL, path, origin)
# Enough for the statistics today; a larger answer costs one more call.
_INITIAL_CAPACITY = 4096


def _declare(lib):
    ssize_t = ctypes.c_ssize_t
    signatures = {
        "delta_malloc": (ctypes.c_void_p, [ssize_t, ctypes.c_int, ctypes.c_void_p]),
        "delta_free": (None, [ctypes.c_void_p, ssize_t, ctypes.c_int, ctypes.c_void_p]),
        "delta_empty_cache": (ctypes.c_int, []),
        "delta_owns": (ctypes.c_int, [ctypes.c_void_p]),
        "delta_stats_json": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
        "delta_reset_peak_stats": (ctypes.c_int, []),
        "delta_dump": (ctypes.c_int, [ctypes.c_char_p]),
        "delta_check_invariants": (ctypes.c_int, []),
        "delta_step": (ctypes.c_int, []),
        "delta_trace_dump": (ctypes.c_int, [ctypes.c_char_p]),
        "delta_last_error": (ctypes.c_char_p, []),
        "delta_version": (ctypes.c_char_p, []),
    }
    for name, (restype, argtypes) in signatures.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise DeltaError(
                f"{lib._name} does not export {name}(): it is not a DELTA library, "
                "or it is older than this package"
            ) from None
        function.restype = restype
        function.argtypes = argtypes


def load():
    """(library, path, origin) of the process's libdelta.so, opening it on first use."""
    global _loaded
    with _lock:
        if _loaded is None:
            path, origin = find_library_with_origin()
            try:
                lib = ctypes.CDLL(path)
            except OSError as error:
                raise DeltaError(f"cannot load {path} (found via {origin}): {error}") from None
            _declare(lib)
            _loaded = (lib, path, origin)
        return _loaded


def library():
    return load()[0]


def _text(raw):
    return raw.decode("utf-8", errors="replace") if raw else ""


def last_error():
    """The calling thread's last DELTA error message, "" if none."""
    return _text(library().delta_last_error())


def _check(status, what):
    if status < 0:
        raise DeltaError(f"{what} failed: {last_error() or f'error {status} (no message)'}")
    return status


def version():
    return _text(library().delta_version())


def stats_json():
    """The allocator's statistics as JSON text (the library's own format)."""
    lib = library()
    capacity = _INITIAL_CAPACITY
    # The size can grow between the two calls (another thread allocates), so retry a few times.
    for _ in range(4):
        buffer = ctypes.create_string_buffer(capacity)
        needed = _check(lib.delta_stats_json(buffer, capacity), "delta_stats_json")
        if needed <= capacity:
            return buffer.value.decode("utf-8")
        capacity = needed + 1024
    raise DeltaError("delta_stats_json: the statistics kept growing while being read")


def reset_peak_stats():
    _check(library().delta_reset_peak_stats(), "delta_reset_peak_stats")


def empty_cache():
    _check(library().delta_empty_cache(), "delta_empty_cache")


def dump(path):
    encoded = os.fsencode(os.fspath(path))
    _check(library().delta_dump(encoded), f"delta_dump({os.fsdecode(encoded)})")


def check_invariants():
    status = library().delta_check_invariants()
    if status < 0:
        raise InvariantViolationError(
            f"delta_check_invariants failed: {last_error() or f'error {status} (no message)'}"
        )


def step():
    _check(library().delta_step(), "delta_step")


def trace_dump(path=None):
    encoded = None if path is None else os.fsencode(os.fspath(path))
    what = "delta_trace_dump()" if path is None else f"delta_trace_dump({os.fsdecode(encoded)})"
    _check(library().delta_trace_dump(encoded), what)
