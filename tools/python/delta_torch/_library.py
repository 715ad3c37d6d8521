"""Where libdelta.so is found.

Order: DELTA_LIBRARY; a libdelta.so already mapped into this process (LD_PRELOAD), so that the
allocator and the control calls share one instance; the repository's build directories, newest
build first; a copy shipped inside the package.
"""

import glob
import os
from pathlib import Path

from .errors import LibraryNotFoundError

LIBRARY_NAME = "libdelta.so"
ENV_LIBRARY = "DELTA_LIBRARY"

_PACKAGE_DIR = Path(__file__).resolve().parent
# tools/python/delta_torch -> repository root, when running from a checkout.
_REPO_ROOT = _PACKAGE_DIR.parents[2] if len(_PACKAGE_DIR.parents) > 2 else None


def repository_root():
    """The source checkout this package lives in, or None when installed elsewhere."""
    if _REPO_ROOT is not None and (_REPO_ROOT / "include" / "delta" / "delta.h").is_file():
        return _REPO_ROOT
    return None


def _mapped_library():
    """A libdelta.so that the dynamic loader already mapped into this process, if any."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6:
                    path = fields[5].strip()
                    # The loader maps the versioned file (libdelta.so.0.1.0) behind the link.
                    name = os.path.basename(path)
                    if (name == LIBRARY_NAME or name.startswith(LIBRARY_NAME + ".")) and os.path.isfile(path):
                        return path
    except OSError:
        pass
    return None


def _build_candidates(root):
    """Every libdelta.so under <root>/build*/, newest first (the build most recently made)."""
    found = set()
    for build_dir in glob.glob(str(root / "build*")):
        if os.path.isdir(build_dir):
            found.update(glob.glob(os.path.join(build_dir, "**", LIBRARY_NAME), recursive=True))
    return sorted(found, key=lambda path: os.path.getmtime(path), reverse=True)


def find_library_with_origin():
    """(path, how it was found). Raises LibraryNotFoundError listing the places searched."""
    searched = []

    explicit = os.environ.get(ENV_LIBRARY)
    if explicit:
        if os.path.isfile(explicit):
            return os.path.abspath(explicit), f"${ENV_LIBRARY}"
        # An explicit setting that is wrong must not silently fall back to another copy.
        raise LibraryNotFoundError([f"${ENV_LIBRARY}={explicit} (no such file)"])
    searched.append(f"${ENV_LIBRARY} (not set)")

    mapped = _mapped_library()
    if mapped:
        return mapped, "already loaded in this process"
    searched.append("libraries loaded in this process (/proc/self/maps)")

    root = repository_root()
    if root is not None:
        candidates = _build_candidates(root)
        if candidates:
            return candidates[0], f"build directory of {root}"
        searched.append(f"{root}/build*/**/{LIBRARY_NAME}")
    else:
        searched.append("build directories (the package is not inside a DELTA checkout)")

    packaged = _PACKAGE_DIR / "lib" / LIBRARY_NAME
    if packaged.is_file():
        return str(packaged), "shipped with the package"
    searched.append(str(packaged))

    raise LibraryNotFoundError(searched)


def find_library():
    """Absolute path of the libdelta.so that delta_torch will use."""
    return find_library_with_origin()[0]
