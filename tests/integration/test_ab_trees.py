"""bench/ab_trees.py: two trees of the delegate, each in its own process, on one model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from delegate_runtime.examples import tiny_mobilenet
from tests.conftest import require_module

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "ab_trees.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_a_tree_against_itself_agrees(tmp_path):
    """The same tree as both sides: the same launches, outputs equal, a ratio printed."""
    model = tmp_path / "tiny.tflite"
    model.write_bytes(tiny_mobilenet())
    done = run("--baseline", str(REPO), str(model), "--runs", "8", "--rounds", "2")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| tiny |")]
    assert len(rows) == 1, done.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    launches, ratio, diff = cells[1], cells[4], cells[5]
    this, base = launches.split(" / ")
    assert this == base and int(this) > 0, rows
    assert ratio.endswith("x") and float(ratio[:-1]) > 0, rows
    assert diff == "0.0e+00", rows
    assert "geometric mean, baseline / this tree" in done.stdout


def test_a_folder_without_the_runtime_is_refused(tmp_path):
    done = run("--baseline", str(tmp_path), str(tmp_path / "m.tflite"))
    assert done.returncode == 2
    assert "holds no delegate_runtime/" in done.stderr


def test_a_model_that_fails_is_named_in_its_row(tmp_path):
    """A file that is no model: its row names the error; the run still ends cleanly."""
    bad = tmp_path / "broken.tflite"
    bad.write_bytes(b"not a flatbuffer")
    done = run("--baseline", str(REPO), str(bad), "--runs", "2", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| broken |"))
    assert "ModelError" in row and "not a .tflite model" in row, row
