"""The README's main job, cold, never more than 10 s without a line.

`devicefarm example example.tflite && devicefarm run example.tflite` as a new user runs it
on this machine, with every kernel cache empty (ours and PoCL's: made so explicitly, not
assumed), each output line timed as it arrives. The canaries and the GPU jobs compile
their kernels (PoCL compiles each when it is first launched: seconds each on a busy 2-core
machine); the lines keep coming meanwhile.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("pyopencl", "pyopencl (the OpenCL runtime, PoCL here)")

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
#: The README's promise: a line at least this often.
MAX_SILENCE_S = 10.0
#: The whole run's limit, cold (measured: 42 s on an idle 2-core machine; it was 3-6
#: minutes while PoCL's program binaries were stored).
RUN_TIMEOUT_S = 540


def timed_lines(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, list[tuple]]:
    """Run `argv`; its exit code and (seconds since start, line) for each output line."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
        if time.monotonic() - start > RUN_TIMEOUT_S:
            proc.kill()
            break
    code = proc.wait()
    lines.append((time.monotonic() - start, "<exit>"))
    return code, lines


def test_the_main_job_cold_never_goes_quiet(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVICEFARM_", "XDG_"))}
    env |= {
        "HOME": str(tmp_path / "user"),  # a new user: a new farm
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # our kernel cache, empty
        "POCL_CACHE_DIR": str(tmp_path / "pocl"),  # PoCL's compiled kernels, empty
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
    }
    devicefarm = [sys.executable, "-m", "devicefarm"]
    made = subprocess.run(
        [*devicefarm, "example", "example.tflite"], cwd=tmp_path, env=env, capture_output=True
    )
    assert made.returncode == 0, made.stderr

    code, lines = timed_lines([*devicefarm, "run", "example.tflite"], env, tmp_path)

    shown = "\n".join(f"{t:7.1f} s  {line}" for t, line in lines)
    print(shown)  # the timed lines, in the test's report when it fails (and with -s)
    assert code == 0, shown
    assert any("canary opencl:" in line for _, line in lines), shown
    gaps = [(b[0] - a[0], b[1]) for a, b in zip([(0.0, "<start>"), *lines], lines, strict=False)]
    longest = max(gaps)
    assert longest[0] <= MAX_SILENCE_S, f"{longest[0]:.1f} s before {longest[1]!r}:\n{shown}"
