"""tools/simrd/compare_dtr.py without a dtr-prototype checkout: the agreement rule, and clear
errors for a wrong --simrd path, bad budgets and a missing deltactl."""

import os
import subprocess
import sys

import compare_dtr

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "simrd", "compare_dtr.py")


def feasible(overhead):
    return {"feasible": True, "overhead": overhead}


INFEASIBLE = {"feasible": False, "overhead": None}


def test_overheads_within_the_tolerance_agree():
    ok, difference = compare_dtr.agree(feasible(1.10), feasible(1.12), 0.05)
    assert ok and abs(difference - 0.02 / 1.10) < 1e-12
    ok, _ = compare_dtr.agree(feasible(1.10), feasible(1.20), 0.05)
    assert not ok


def test_feasibility_must_match():
    assert compare_dtr.agree(INFEASIBLE, INFEASIBLE, 0.05) == (True, None)
    assert compare_dtr.agree(INFEASIBLE, feasible(1.3), 0.05) == (False, None)
    assert compare_dtr.agree(feasible(1.3), INFEASIBLE, 0.05) == (False, None)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def test_a_wrong_simrd_path_is_named(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("")
    executable = tmp_path / "deltactl"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    done = run(str(log), "--simrd", str(tmp_path / "nowhere"), "--deltactl", str(executable))
    assert done.returncode != 0
    assert "not the simrd folder" in done.stderr


def test_bad_budgets_and_a_missing_deltactl_are_refused(tmp_path):
    done = run("x.log", "--simrd", str(tmp_path), "--budgets", "0.5,half")
    assert done.returncode != 0 and "comma-separated list of numbers" in done.stderr
    done = run("x.log", "--simrd", str(tmp_path), "--budgets", "1.5")
    assert done.returncode != 0 and "(0, 1]" in done.stderr
    done = run("x.log", "--simrd", str(tmp_path), "--deltactl", str(tmp_path / "none"))
    assert done.returncode != 0 and "not an executable" in done.stderr


def test_past_simrds_limit_a_slower_dtr_still_agrees():
    thrashed = {"feasible": False, "overhead": None, "why": "over 2x the step"}
    assert compare_dtr.agree(thrashed, feasible(2.4), 0.05) == (True, None)
    assert compare_dtr.agree(thrashed, feasible(1.5), 0.05) == (False, None)
