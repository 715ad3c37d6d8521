"""The last word of every trace importer: the trace it made passes the format's checks, or the
import is refused naming the file and the first problem. An importer's own checks name the line
or the place; this catches whatever they let through (a size past what a trace may hold, say),
so that no caller ever holds an invalid trace."""

import delta_trace as dt
from alloc_stream import ImportError_


def checked(trace, path):
    try:
        dt.validate(trace)
    except dt.TraceError as e:
        raise ImportError_(f"{path}: the imported trace is not valid: {e}") from None
    return trace
