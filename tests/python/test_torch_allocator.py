"""enable() and pool() against the real PyTorch. PyTorch swaps its allocator at most once per
process, so each case runs in a fresh interpreter."""

import textwrap

import pytest

from conftest import assert_ok, child_env, run_python

torch = pytest.importorskip("torch", reason="PyTorch is not installed in this interpreter")

HAS_GPU = torch.cuda.is_available()


def run_torch(code, delta_library, **env):
    return run_python(textwrap.dedent(code), env=child_env(DELTA_LIBRARY=delta_library, **env))


def test_pluggable_allocator_loads_libdelta_and_is_accepted(delta_library):
    result = run_torch(
        """
        import sys, torch
        allocator = torch.cuda.memory.CUDAPluggableAllocator(%r,
                                                             "delta_malloc", "delta_free")
        torch.cuda.memory.change_current_allocator(allocator)
        print(torch._C._cuda_getAllocatorBackend())
        """ % delta_library,
        delta_library,
    )
    assert assert_ok(result).stdout.split() == ["pluggable"]


def test_enable_installs_delta_once(delta_library):
    result = run_torch(
        """
        import torch, delta_torch
        assert not delta_torch.is_enabled()
        first = delta_torch.enable()
        second = delta_torch.enable()
        assert first is second, "enable() must hand back the allocator it installed"
        assert isinstance(first, torch.cuda.memory.CUDAPluggableAllocator)
        print(delta_torch.is_enabled(), torch._C._cuda_getAllocatorBackend())
        """,
        delta_library,
    )
    assert assert_ok(result).stdout.split() == ["True", "pluggable"]


def test_enable_after_another_allocator_was_installed_explains(delta_library):
    # Without a GPU the native allocator cannot be made "used"; installing any allocator first
    # puts PyTorch in the same state (its allocator is initialized and cannot be swapped).
    result = run_torch(
        """
        import torch, delta_torch
        other = torch.cuda.memory.CUDAPluggableAllocator(%r, "delta_malloc", "delta_free")
        torch.cuda.memory.change_current_allocator(other)
        try:
            delta_torch.enable()
        except delta_torch.AllocatorAlreadyInitializedError as error:
            print("ERROR:", error)
        print("enabled:", delta_torch.is_enabled())
        """ % delta_library,
        delta_library,
    )
    out = assert_ok(result).stdout
    assert "ERROR: DELTA cannot replace PyTorch's CUDA allocator" in out
    assert "before the first CUDA tensor" in out
    assert "Can't swap an already initialized allocator" in out, "PyTorch's own words are kept"
    assert "enabled: False" in out


def test_enable_after_cuda_initialized_refuses_before_touching_torch(delta_library):
    # The seam: torch.cuda.is_initialized() is what a first CUDA tensor turns true. Faking it
    # checks that enable() refuses up front and leaves PyTorch's allocator alone.
    result = run_torch(
        """
        import torch, delta_torch
        torch.cuda.is_initialized = lambda: True
        try:
            delta_torch.enable()
        except delta_torch.AllocatorAlreadyInitializedError as error:
            print("ERROR:", error)
        print("enabled:", delta_torch.is_enabled())
        print("backend:", torch._C._cuda_getAllocatorBackend())
        """,
        delta_library,
    )
    out = assert_ok(result).stdout
    assert "ERROR: DELTA cannot replace PyTorch's CUDA allocator: CUDA was already initialized" in out
    assert "DELTA_ENABLE=1" in out and "delta_torch.pool()" in out
    assert "enabled: False" in out
    assert "backend: native" in out


def test_enable_with_a_missing_library_names_it(tmp_path):
    missing = str(tmp_path / "libdelta.so")
    result = run_python(
        "import delta_torch\n"
        "try:\n    delta_torch.enable()\n"
        "except delta_torch.LibraryNotFoundError as error:\n    print(error)\n",
        env=child_env(DELTA_LIBRARY=missing),
    )
    assert f"DELTA_LIBRARY={missing} (no such file)" in assert_ok(result).stdout


def test_pool_after_enable_has_nothing_left_to_route(delta_library):
    result = run_torch(
        """
        import delta_torch
        delta_torch.enable()
        with delta_torch.pool() as mem_pool:
            print(mem_pool)
        """,
        delta_library,
    )
    assert assert_ok(result).stdout.split() == ["None"]


@pytest.mark.skipif(HAS_GPU, reason="checks the message given on machines without a GPU")
def test_pool_without_a_gpu_says_so(delta_library):
    result = run_torch(
        """
        import delta_torch
        try:
            with delta_torch.pool():
                pass
        except delta_torch.DeltaError as error:
            print("ERROR:", error)
        """,
        delta_library,
    )
    assert "ERROR: delta_torch.pool() needs a CUDA device" in assert_ok(result).stdout


@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_pool_routes_only_the_scope_through_delta(delta_library):
    result = run_torch(
        """
        import torch, delta_torch
        outside_before = torch.empty(1 << 20, device="cuda")
        before = delta_torch.stats()
        with delta_torch.pool() as mem_pool:
            inside = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
        after = delta_torch.stats()
        outside_after = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
        get = lambda s, k: s[k] if k in s else s["stats"][k]
        print(get(after, "alloc_count") - get(before, "alloc_count"))
        print(get(delta_torch.stats(), "alloc_count") - get(after, "alloc_count"))
        """,
        delta_library,
        DELTA_DEVICE=None,  # the real GPU
    )
    grown_inside, grown_outside = map(int, assert_ok(result).stdout.split())
    assert grown_inside >= 1
    assert grown_outside == 0


@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_enabled_tensors_come_from_delta(delta_library):
    result = run_torch(
        """
        import torch, delta_torch
        delta_torch.enable()
        x = torch.ones(8 << 20, device="cuda")
        y = (x * 2).sum().item()
        stats = delta_torch.stats()
        get = lambda s, k: s[k] if k in s else s["stats"][k]
        print(int(y), get(stats, "allocated_bytes") >= x.numel() * 4)
        del x
        delta_torch.check_invariants()
        """,
        delta_library,
        DELTA_DEVICE=None,  # the real GPU
    )
    assert assert_ok(result).stdout.split() == [str(2 * (8 << 20)), "True"]
