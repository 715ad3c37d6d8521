"""python -m delta_torch info."""

import json

from conftest import assert_ok, child_env, run_module


def test_info_reports_library_version_device_and_settings(delta_library):
    env = child_env(DELTA_LIBRARY=delta_library, PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:64")
    out = assert_ok(run_module("delta_torch", "info", env=env)).stdout
    assert f"library      {delta_library}  (found via $DELTA_LIBRARY)" in out
    assert "device       sim" in out
    assert "DELTA_DEVICE=sim" in out
    assert "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64" in out


def test_info_json_is_machine_readable(delta_library):
    env = child_env(DELTA_LIBRARY=delta_library)
    info = json.loads(assert_ok(run_module("delta_torch", "info", "--json", env=env)).stdout)
    assert info["library"] == delta_library
    assert info["library_version"]
    assert info["device"].startswith("sim")
    assert info["settings"]["DELTA_DEVICE"] == "sim"
    assert isinstance(info["stats"], dict)


def test_info_reports_a_device_that_cannot_open(delta_library):
    env = child_env(DELTA_LIBRARY=delta_library, DELTA_DEVICE="no-such-device")
    info = json.loads(assert_ok(run_module("delta_torch", "info", "--json", env=env)).stdout)
    assert info["device"] is None
    assert "no-such-device" in info["device_error"]


def test_info_without_a_library_fails_with_the_search_list(tmp_path):
    missing = str(tmp_path / "libdelta.so")
    result = run_module("delta_torch", "info", env=child_env(DELTA_LIBRARY=missing))
    assert result.returncode == 1
    assert "libdelta.so was not found" in result.stderr
    assert missing in result.stderr


def test_info_requires_a_command():
    result = run_module("delta_torch", env=child_env())
    assert result.returncode == 2
    assert "info" in result.stderr
