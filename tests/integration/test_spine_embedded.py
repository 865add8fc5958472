"""`devicefarm run` as a new user runs it: no server, a fresh home folder, real devices."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.farm import write_model

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 240


def devicefarm(args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(home))
    for k in ("DEVICEFARM_DB", "DEVICEFARM_BROKER"):
        env.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", *args],
        cwd=home.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def test_run_on_this_machines_real_devices(tmp_path: Path) -> None:
    model = write_model(tmp_path / "tiny.tflite")
    home = tmp_path / "home"
    done = devicefarm(["run", str(model), "--runs", "3", "--diff-runs", "2"], home)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "cpu:reference:" in out and "canary" in out
    assert "[1/" in out  # progress as jobs end
    table = out[out.index("model ") :]
    assert "tiny.tflite" in table and "succeeded" in table
    if "opencl:" in out.split("\n", 1)[0]:  # an OpenCL device was found (PoCL here)
        assert "gpu-fp32" in table and "gpu-fp16" in table
    assert (home / "farm.db").exists()
    # the same farm answers the other commands
    status = devicefarm(["status"], home)
    assert status.returncode == 0 and "succeeded" in status.stdout
    results = devicefarm(["results", "1", "--format", "json"], home)
    assert results.returncode == 0 and '"state": "succeeded"' in results.stdout


def test_run_with_a_bad_model_says_why_and_submits_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model")
    home = tmp_path / "home"
    done = devicefarm(["run", str(bad), str(tmp_path / "missing.tflite")], home)
    assert done.returncode == 1
    assert "2 problem(s), nothing was submitted" in done.stderr
    assert "bad.tflite" in done.stderr and "missing.tflite" in done.stderr
    assert not (home / "farm.db").exists()


def test_run_on_no_op_devices_with_chosen_configs(tmp_path: Path) -> None:
    models = [write_model(tmp_path / f"m{i}.tflite", 1.0 + i) for i in range(3)]
    done = devicefarm(
        ["run", *map(str, models), "--devices", "noop:a,noop:b", "--configs", "cpu,gpu-fp16"],
        tmp_path / "home",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[12/12]" in done.stdout
