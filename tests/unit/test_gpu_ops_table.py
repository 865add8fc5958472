"""docs/gpu_ops.md is the table scripts/gpu_ops_table.py makes from both sides, and every op
LiteRT's GPU delegate parses is taken by ours, but the one said not to be."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from delegate_runtime.gpu.opencl.records import REGISTRY

REPO = Path(__file__).resolve().parents[2]
#: LiteRT's ops ours does not take, each with its reason in the script's DIFFERENCES.
NOT_TAKEN = {"CUSTOM:Resampler", "DENSIFY"}  # DENSIFY: folded at init, never lowered


def _script():
    spec = importlib.util.spec_from_file_location(
        "gpu_ops_table", REPO / "scripts/gpu_ops_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_doc_is_the_generated_table() -> None:
    assert (REPO / "docs/gpu_ops.md").read_text() == _script().table()


def test_every_op_litert_parses_is_ours_or_said_not_to_be() -> None:
    script = _script()
    theirs = {*script.LITERT_BUILTINS, *(f"CUSTOM:{c}" for c in script.LITERT_CUSTOMS)}
    assert sorted(theirs - set(REGISTRY)) == sorted(NOT_TAKEN)
    assert all(op in script.DIFFERENCES for op in NOT_TAKEN)
