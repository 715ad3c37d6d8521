"""Where delta_torch looks for libdelta.so, and what it says when it finds nothing."""

import os
import time

import pytest

from conftest import assert_ok, child_env, run_python
from delta_torch import _library
from delta_torch.errors import LibraryNotFoundError


@pytest.fixture
def empty_places(monkeypatch, tmp_path):
    """No DELTA_LIBRARY, nothing mapped, a fake checkout without builds, no packaged copy."""
    monkeypatch.delenv("DELTA_LIBRARY", raising=False)
    monkeypatch.setattr(_library, "_mapped_library", lambda: None)
    checkout = tmp_path / "checkout"
    (checkout / "include" / "delta").mkdir(parents=True)
    (checkout / "include" / "delta" / "delta.h").write_text("/* marker */\n")
    monkeypatch.setattr(_library, "_REPO_ROOT", checkout)
    package_dir = tmp_path / "site" / "delta_torch"
    package_dir.mkdir(parents=True)
    monkeypatch.setattr(_library, "_PACKAGE_DIR", package_dir)
    return checkout, package_dir


def _touch(path, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_explicit_path_wins(monkeypatch, tmp_path, empty_places):
    checkout, _ = empty_places
    _touch(checkout / "build" / "src" / "libdelta.so")
    chosen = _touch(tmp_path / "custom" / "libdelta.so")
    monkeypatch.setenv("DELTA_LIBRARY", str(chosen))
    assert _library.find_library_with_origin() == (str(chosen), "$DELTA_LIBRARY")


def test_wrong_explicit_path_is_an_error_not_a_fallback(monkeypatch, tmp_path, empty_places):
    checkout, _ = empty_places
    _touch(checkout / "build" / "src" / "libdelta.so")
    missing = tmp_path / "nowhere" / "libdelta.so"
    monkeypatch.setenv("DELTA_LIBRARY", str(missing))
    with pytest.raises(LibraryNotFoundError) as error:
        _library.find_library()
    assert f"DELTA_LIBRARY={missing} (no such file)" in str(error.value)


def test_build_directory_found_newest_first(empty_places):
    checkout, _ = empty_places
    now = time.time()
    _touch(checkout / "build" / "src" / "libdelta.so", now - 100)
    newest = _touch(checkout / "build-release" / "lib" / "libdelta.so", now)
    path, origin = _library.find_library_with_origin()
    assert path == str(newest)
    assert str(checkout) in origin


def test_packaged_copy_is_the_last_resort(empty_places):
    _, package_dir = empty_places
    packaged = _touch(package_dir / "lib" / "libdelta.so")
    assert _library.find_library_with_origin() == (str(packaged), "shipped with the package")


def test_nothing_found_lists_every_place(empty_places):
    checkout, package_dir = empty_places
    with pytest.raises(LibraryNotFoundError) as error:
        _library.find_library()
    message = str(error.value)
    assert "$DELTA_LIBRARY (not set)" in message
    assert "/proc/self/maps" in message
    assert f"{checkout}/build*/**/libdelta.so" in message
    assert str(package_dir / "lib" / "libdelta.so") in message
    assert error.value.searched and len(error.value.searched) == 4


def test_outside_a_checkout_says_so(monkeypatch, empty_places):
    monkeypatch.setattr(_library, "_REPO_ROOT", None)
    with pytest.raises(LibraryNotFoundError, match="not inside a DELTA checkout"):
        _library.find_library()


def test_library_already_loaded_is_preferred(delta_library):
    # A process that got libdelta.so through LD_PRELOAD (here: ctypes) must talk to that copy,
    # not open a second allocator from a build directory.
    code = (
        "import ctypes, os, sys\n"
        "ctypes.CDLL(sys.argv[1])\n"
        "os.environ.pop('DELTA_LIBRARY', None)\n"
        "from delta_torch import _library\n"
        "print(*_library.find_library_with_origin(), sep='|')\n"
    )
    result = assert_ok(run_python(code, delta_library, env=child_env(DELTA_LIBRARY=None)))
    path, origin = result.stdout.strip().split("|")
    assert os.path.samefile(path, delta_library)
    assert origin == "already loaded in this process"
