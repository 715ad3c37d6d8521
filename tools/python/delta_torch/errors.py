"""Exceptions raised by delta_torch. All derive from DeltaError."""


class DeltaError(RuntimeError):
    """A DELTA call failed; the message carries the library's own explanation."""


class LibraryNotFoundError(DeltaError):
    """libdelta.so was not found. The message lists every place that was searched."""

    def __init__(self, searched):
        self.searched = list(searched)
        lines = "\n".join(f"  - {place}" for place in self.searched)
        super().__init__(
            "libdelta.so was not found. Searched:\n"
            f"{lines}\n"
            "Build it with `cmake -S . -B build && cmake --build build --target delta`, "
            "or point DELTA_LIBRARY at the file."
        )


class AllocatorAlreadyInitializedError(DeltaError):
    """PyTorch's CUDA allocator was in use before enable() could swap it."""


class InvariantViolationError(DeltaError):
    """delta_check_invariants() found a broken invariant in the allocator's state."""
