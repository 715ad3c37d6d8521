"""Building and writing DELTA alloc streams (format "delta-alloc-stream", version 1).

The format is described in docs/replay.md. Importers feed an AllocStreamBuilder with the
allocations and frees they reconstruct; the builder hands out ids, enforces the rules the C++
reader enforces (no free of an unknown id, no second alloc of a live id, positive sizes) so
that a broken importer fails here with a clear message instead of producing a stream the
replayer rejects, and keeps the running peak of live bytes.
"""

import gzip
import json
import math

FORMAT_NAME = "delta-alloc-stream"
FORMAT_VERSION = 1
# Anything larger than this is not a real device allocation; the C++ reader uses the same bound.
MAX_ALLOCATION_BYTES = 1 << 44  # 16 TiB


class ImportError_(Exception):
    """A trace that cannot be turned into a valid alloc stream. The message says why."""


class AllocStreamBuilder:
    def __init__(self, source):
        self.source = source
        self.device = {}
        self.events = []
        self.initial_live = []
        self.native_observed = None
        self._live = {}  # id -> size
        self._next_id = 0
        self._live_bytes = 0
        self._last_t = None

    def new_id(self):
        block_id = self._next_id
        self._next_id += 1
        return block_id

    def _check_size(self, size, what):
        if not isinstance(size, int) or size <= 0 or size > MAX_ALLOCATION_BYTES:
            raise ImportError_(f"{what}: size {size!r} is not a plausible allocation size")

    def _clamp_time(self, t):
        # Event order is what the replay follows; times only weight statistics. A clock that
        # steps back (several host threads) is clamped so times never decrease.
        if self._last_t is not None and t < self._last_t:
            t = self._last_t
        self._last_t = t
        return t

    def add_initial_live(self, block_id, size, stream=0):
        """A block that was already allocated when the trace starts."""
        self._check_size(size, f"initial live block {block_id}")
        if block_id in self._live:
            raise ImportError_(f"initial live block {block_id} is already live")
        self._live[block_id] = size
        self.initial_live.append({"id": block_id, "size": size, "stream": stream})
        self._live_bytes += size

    def alloc(self, block_id, size, stream, t):
        self._check_size(size, f"alloc of block {block_id}")
        if block_id in self._live:
            raise ImportError_(f"alloc of block {block_id}, which is still live")
        self._live[block_id] = size
        self._live_bytes += size
        self.events.append({"op": "alloc", "id": block_id, "size": size, "stream": stream,
                            "t": self._clamp_time(t)})

    def free(self, block_id, t):
        size = self._live.pop(block_id, None)
        if size is None:
            raise ImportError_(f"free of block {block_id}, which is not live")
        self._live_bytes -= size
        self.events.append({"op": "free", "id": block_id, "t": self._clamp_time(t)})

    def is_live(self, block_id):
        return block_id in self._live

    @property
    def peak_live_bytes(self):
        """Peak of live bytes over the stream. Initial live blocks exist from the start even
        when an importer discovers them late, so the peak is computed from the final lists."""
        live = sum(b["size"] for b in self.initial_live)
        peak = live
        sizes = {}
        for event in self.events:
            if event["op"] == "alloc":
                sizes[event["id"]] = event["size"]
                live += event["size"]
                peak = max(peak, live)
            else:
                live -= sizes.pop(event["id"], 0)
        return peak

    @property
    def live_bytes(self):
        return self._live_bytes

    def to_json(self):
        peak_live_bytes = self.peak_live_bytes
        doc = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "source": self.source,
            "device": self.device,
            "initial_live": self.initial_live,
            "summary": {
                "allocs": sum(1 for e in self.events if e["op"] == "alloc"),
                "frees": sum(1 for e in self.events if e["op"] == "free"),
                "initial_live_bytes": sum(b["size"] for b in self.initial_live),
                "peak_live_bytes": peak_live_bytes,
            },
            "events": self.events,
        }
        if self.native_observed is not None:
            doc["native_observed"] = self.native_observed
        return doc

    def write(self, path):
        text = json.dumps(self.to_json(), separators=(",", ":"))
        if str(path).endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as out:
                out.write(text)
        else:
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)


def format_bytes(n):
    if n < 1024:
        return f"{n} B"
    units = ["KiB", "MiB", "GiB", "TiB"]
    exponent = min(int(math.log(n, 1024)), len(units))
    return f"{n / 1024 ** exponent:.2f} {units[exponent - 1]}"
