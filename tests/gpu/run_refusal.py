#!/usr/bin/env python3
"""DELTA_MODE=run (or auto) with libdelta.so loaded by dlopen (as the pluggable allocator loads
it), not preloaded: the first allocation must fail, and DELTA's last error must name the route
that works (LD_PRELOAD=libdelta.so; for auto mode also the launcher, `deltactl launch`, given as
EXPECTED). Prints one JSON line; exit 0 when refused so.

usage: DELTA_MODE=run|auto DELTA_DEVICE=cuda run_refusal.py LIBDELTA [EXPECTED]
"""
import ctypes
import json
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.delta_malloc.restype = ctypes.c_void_p
lib.delta_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
lib.delta_last_error.restype = ctypes.c_char_p
ptr = lib.delta_malloc(1 << 20, 0, None)
message = (lib.delta_last_error() or b"").decode()
print(json.dumps({"probe": "refusal", "refused": ptr is None, "message": message}))
expected = sys.argv[2] if len(sys.argv) > 2 else "LD_PRELOAD=libdelta.so"
sys.exit(0 if ptr is None and "LD_PRELOAD=libdelta.so" in message and expected in message else 1)
