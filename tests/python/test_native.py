"""The control API through ctypes, on DELTA's simulated device (conftest sets DELTA_DEVICE=sim).

delta_malloc / delta_free are driven directly, as PyTorch would call them, so that the
statistics, dumps and cache release have something to report."""

import ctypes
import json
import os

import pytest

import delta_torch
from conftest import assert_ok, child_env, library_or_skip, run_python, stat
from delta_torch import _native

MiB = 1 << 20


@pytest.fixture(scope="module")
def lib():
    path = library_or_skip()
    assert os.path.samefile(delta_torch.library_path(), path)
    return _native.library()


@pytest.fixture
def block(lib):
    """Allocates on the default stream (0) and frees whatever the test left allocated."""
    live = []

    def allocate(size):
        ptr = lib.delta_malloc(size, 0, None)
        assert ptr, f"delta_malloc({size}) failed: {delta_torch.last_error()}"
        live.append((ptr, size))
        return ptr

    def free(ptr):
        for entry in live:
            if entry[0] == ptr:
                live.remove(entry)
                lib.delta_free(ptr, entry[1], 0, None)
                return
        raise AssertionError("freeing a block the test did not allocate")

    allocate.free = free
    yield allocate
    for ptr, size in live:
        lib.delta_free(ptr, size, 0, None)


def test_version_is_reported(lib):
    text = delta_torch.version()
    assert isinstance(text, str) and text.strip()


def test_stats_is_a_dict_of_counters(lib):
    stats = delta_torch.stats()
    assert isinstance(stats, dict)
    for name in ("allocated_bytes", "reserved_bytes", "alloc_count", "free_count"):
        assert isinstance(stat(stats, name), int), name


def test_allocation_shows_in_stats_and_free_returns_it(lib, block):
    before = delta_torch.stats()
    ptr = block(3 * MiB)
    assert lib.delta_owns(ctypes.c_void_p(ptr)) == 1
    during = delta_torch.stats()
    assert stat(during, "allocated_bytes") >= stat(before, "allocated_bytes") + 3 * MiB
    assert stat(during, "alloc_count") == stat(before, "alloc_count") + 1
    assert stat(during, "reserved_bytes") >= stat(during, "allocated_bytes")

    block.free(ptr)
    after = delta_torch.stats()
    assert lib.delta_owns(ctypes.c_void_p(ptr)) == 0
    assert stat(after, "allocated_bytes") == stat(before, "allocated_bytes")
    assert stat(after, "free_count") == stat(before, "free_count") + 1
    delta_torch.check_invariants()


def test_peak_survives_free_until_reset(lib, block):
    delta_torch.reset_peak_stats()
    base = stat(delta_torch.stats(), "allocated_bytes")
    block.free(block(8 * MiB))
    stats = delta_torch.stats()
    assert stat(stats, "allocated_peak") >= base + 8 * MiB
    delta_torch.reset_peak_stats()
    assert stat(delta_torch.stats(), "allocated_peak") == stat(delta_torch.stats(), "allocated_bytes")


def test_empty_cache_releases_cached_pages(lib, block):
    delta_torch.empty_cache()
    baseline = stat(delta_torch.stats(), "reserved_bytes")
    block.free(block(16 * MiB))
    cached = stat(delta_torch.stats(), "reserved_bytes")
    assert cached >= baseline + 16 * MiB, "a freed block stays cached until empty_cache"
    delta_torch.empty_cache()
    assert stat(delta_torch.stats(), "reserved_bytes") == baseline
    delta_torch.check_invariants()


def test_stats_reads_answers_larger_than_the_first_buffer(lib, monkeypatch):
    full = _native.stats_json()
    monkeypatch.setattr(_native, "_INITIAL_CAPACITY", 8)
    assert json.loads(_native.stats_json()).keys() == json.loads(full).keys()


def test_dump_writes_valid_json_with_the_history(lib, block, tmp_path):
    ptr = block(1 * MiB)
    target = tmp_path / "dump.json"
    assert delta_torch.dump(target) == target
    document = json.loads(target.read_text())
    assert isinstance(document, dict)
    assert document["device"]["kind"] == "sim"
    events = document["events"]
    assert any(event["kind"] == "alloc" and event["ptr"] == ptr for event in events)
    assert not list(tmp_path.glob("dump.json.tmp*")), "the atomic write left its temporary file"


def test_dump_to_a_missing_directory_explains_itself(lib, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "dump.json"
    with pytest.raises(delta_torch.DeltaError) as error:
        delta_torch.dump(target)
    assert str(target) in str(error.value)
    assert delta_torch.last_error(), "the library keeps the reason for delta_last_error()"
    assert not target.exists()


def test_invariants_hold_after_mixed_traffic(lib, block):
    ptrs = [block(size) for size in (512, 4096, 3 * MiB, 700 * 1024, 12 * MiB, 1)]
    for ptr in ptrs[::2]:
        block.free(ptr)
    delta_torch.check_invariants()
    delta_torch.empty_cache()
    delta_torch.check_invariants()


def test_control_calls_do_not_import_torch(lib):
    code = (
        "import sys, delta_torch\n"
        "delta_torch.stats(); delta_torch.empty_cache(); delta_torch.check_invariants()\n"
        "print('torch' in sys.modules)\n"
    )
    result = assert_ok(run_python(code, env=child_env(DELTA_LIBRARY=delta_torch.library_path())))
    assert result.stdout.split() == ["False"]
