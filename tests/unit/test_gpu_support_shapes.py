"""The GPU delegate's support check is safe on any shape the reader accepts: a node whose
tensors a record was not written for (a 0-D tensor where DEPTHWISE_CONV_2D wants 4-D) is
left to the CPU reference with a reason, never an IndexError (issue 42's mutant)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.ops.oneop import Const, In, one_op

REPO = Path(__file__).resolve().parents[2]


def zero_d_depthwise(path: Path) -> Path:
    model, _ = one_op(
        "DEPTHWISE_CONV_2D",
        [In(np.zeros((), np.float32)), Const(np.ones((1, 1, 1, 1), np.float32), np.float32)],
        [((), np.float32)],
        depth_multiplier=1,
        stride_h=1,
        stride_w=1,
    )
    path.write_bytes(model)
    return path


def test_inspect_names_why_the_gpu_leaves_the_node(tmp_path: Path) -> None:
    model = zero_d_depthwise(tmp_path / "dw0.tflite")
    done = subprocess.run(
        [sys.executable, "-m", "devicefarm", "inspect", str(model)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "DEPTHWISE_CONV_2D: Input, weights and output must be 4-D (NHWC)." in done.stdout


def test_a_record_check_that_raises_leaves_the_node_to_the_cpu(monkeypatch) -> None:
    """Any record's check, not only the one fixed: an exception is a refusal with a reason."""
    import dataclasses

    from delegate_runtime.gpu import support
    from delegate_runtime.reader import read_model

    model, _ = one_op(
        "DEPTHWISE_CONV_2D",
        [
            In(np.zeros((1, 4, 4, 2), np.float32)),
            Const(np.ones((1, 1, 1, 2), np.float32), np.float32),
        ],
        [((1, 4, 4, 2), np.float32)],
        depth_multiplier=1,
        stride_h=1,
        stride_w=1,
    )
    sg = read_model(model).main
    assert support.supports(sg.operators[0], sg) == (True, "")

    def raising(op, sg):
        raise IndexError("tuple index out of range")

    record = support.record_for("DEPTHWISE_CONV_2D")
    broken = dataclasses.replace(record, check=raising)
    monkeypatch.setattr(support, "record_for", lambda name: broken)
    ok, why = support.supports(sg.operators[0], sg)
    assert not ok and "IndexError" in why
