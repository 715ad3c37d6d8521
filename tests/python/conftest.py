"""Shared set-up for the delta_torch tests.

The library under test comes from DELTA_LIBRARY (tests/python/run.sh or the test runner sets
it). In-process tests run DELTA on its simulated device, so no GPU is needed; every test that
changes PyTorch's allocator runs in a subprocess, because that can happen once per process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO_ROOT / "tools" / "python"

# Importable even when the package was not installed (the start-up hook test checks that).
if str(PACKAGE_DIR) not in sys.path:
    sys.path.insert(0, str(PACKAGE_DIR))

# The process-wide allocator is created from the environment on first use: make it the sim.
os.environ["DELTA_DEVICE"] = "sim"
# Keep an event history so that dumps can be checked for it (it is off by default).
os.environ.setdefault("DELTA_EVENT_LOG", "4096")


def library_or_skip():
    path = os.environ.get("DELTA_LIBRARY")
    if not path:
        pytest.skip("DELTA_LIBRARY is not set: point it at libdelta.so (tests/python/run.sh does)")
    if not os.path.isfile(path):
        pytest.fail(f"DELTA_LIBRARY={path} does not exist")
    return os.path.abspath(path)


@pytest.fixture
def delta_library():
    return library_or_skip()


def stat(stats, name):
    """A counter from delta_stats_json, whether the library nests them under "stats" or not."""
    if name in stats:
        return stats[name]
    return stats["stats"][name]


def child_env(**overrides):
    """The environment for a child interpreter: ours, with the package importable, DELTA on
    the sim device, DELTA_ENABLE off unless asked; None values remove a variable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_DIR), env.get("PYTHONPATH")]))
    env["DELTA_DEVICE"] = "sim"
    env.pop("DELTA_ENABLE", None)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_python(code, *args, env=None, timeout=120):
    """Run `python -c code` in a fresh interpreter; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env if env is not None else child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_module(*args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", *args],
        env=env if env is not None else child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result
