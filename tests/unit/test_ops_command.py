"""`devicefarm ops` lists MediaPipe's six custom ops (issue 13): the reference
interpreter's ops, and the GPU delegate's rules with `--gpu`."""

from __future__ import annotations

import pytest

from devicefarm.cli import main

#: The custom ops of MediaPipe's models (mediapipe/util/tflite/operations/), which
#: TFLite's GPU delegate parses (delegates/gpu/common/mediapipe/).
MEDIAPIPE_OPS = [
    "Convolution2DTransposeBias",
    "MaxPoolingWithArgmax2D",
    "MaxUnpooling2D",
    "Landmarks2TransformMatrix",
    "TransformLandmarks",
    "TransformTensorBilinear",
]


def _listed(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, str]:
    assert main(argv) == 0
    rows = capsys.readouterr().out.splitlines()
    return {row.split()[0]: row for row in rows if row.strip()}


@pytest.mark.parametrize("op", MEDIAPIPE_OPS)
def test_reference_interpreter_lists_the_op(capsys, op: str) -> None:
    assert f"CUSTOM:{op}" in _listed(capsys, ["ops"])


@pytest.mark.parametrize("op", MEDIAPIPE_OPS)
def test_gpu_delegate_lists_the_op(capsys, op: str) -> None:
    row = _listed(capsys, ["ops", "--gpu"]).get(f"CUSTOM:{op}")
    assert row is not None and "float v[1" in row, row
