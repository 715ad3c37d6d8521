"""DELTA_ENABLE: the start-up hook that switches unmodified jobs onto DELTA."""

import site
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from conftest import PACKAGE_DIR, assert_ok, child_env, run_python

pytest.importorskip("torch", reason="PyTorch is not installed in this interpreter")

HOOK_FILE = "delta_torch_startup.pth"


def _hook_installed():
    places = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    return any((Path(place) / HOOK_FILE).is_file() for place in places)


pytestmark = pytest.mark.skipif(
    not _hook_installed(), reason=f"{HOOK_FILE} is not installed in {sys.prefix} (run scripts/setup-python)"
)

# What the job sees when its first line runs.
PROBE = textwrap.dedent(
    """
    import sys
    torch_loaded = "torch" in sys.modules
    package_loaded = "delta_torch" in sys.modules
    enabled = package_loaded and sys.modules["delta_torch"].is_enabled()
    backend = sys.modules["torch"]._C._cuda_getAllocatorBackend() if torch_loaded else "-"
    print(torch_loaded, package_loaded, enabled, backend)
    """
)


def test_installed_hook_matches_the_source():
    installed = Path(sysconfig.get_paths()["purelib"]) / HOOK_FILE
    assert installed.read_text() == (PACKAGE_DIR / HOOK_FILE).read_text()


def test_enabled_before_the_job_starts(delta_library):
    result = run_python(PROBE, env=child_env(DELTA_LIBRARY=delta_library, DELTA_ENABLE="1"))
    assert assert_ok(result).stdout.split() == ["True", "True", "True", "pluggable"]


def test_start_up_stays_light_without_the_switch(delta_library):
    result = run_python(PROBE, env=child_env(DELTA_LIBRARY=delta_library))
    assert assert_ok(result).stdout.split() == ["False", "False", "False", "-"]


@pytest.mark.parametrize("value", ["0", "off", "false"])
def test_switch_off_values_leave_pytorch_alone(delta_library, value):
    result = run_python(PROBE, env=child_env(DELTA_LIBRARY=delta_library, DELTA_ENABLE=value))
    torch_loaded, _, enabled, _ = assert_ok(result).stdout.split()
    assert (torch_loaded, enabled) == ("False", "False")


def test_unknown_switch_value_stops_the_job(delta_library):
    result = run_python("print('job ran')", env=child_env(DELTA_LIBRARY=delta_library, DELTA_ENABLE="maybe"))
    assert result.returncode == 1
    assert "job ran" not in result.stdout
    assert "DELTA_ENABLE='maybe' is not understood" in result.stderr


def test_switch_on_without_a_library_stops_the_job(tmp_path):
    missing = str(tmp_path / "libdelta.so")
    result = run_python("print('job ran')", env=child_env(DELTA_LIBRARY=missing, DELTA_ENABLE="1"))
    assert result.returncode == 1
    assert "job ran" not in result.stdout
    assert "DELTA_ENABLE=1 but DELTA could not be enabled" in result.stderr
    assert missing in result.stderr


def test_job_enabling_again_is_harmless(delta_library):
    code = "import delta_torch; delta_torch.enable(); delta_torch.enable(); print(delta_torch.is_enabled())"
    result = run_python(code, env=child_env(DELTA_LIBRARY=delta_library, DELTA_ENABLE="yes"))
    assert assert_ok(result).stdout.split() == ["True"]
