"""The per-device delegate comparison: the fastest accurate configuration not slower than
the CPU is recommended; the refusals are those submission kept."""

from __future__ import annotations

import pytest

from orchestrator.delegate_choice import choose, format_choice
from orchestrator.refusals import refusal


def _row(config, avg_ms, err=None, state="succeeded", delegated=None, device="android:p4"):
    return {"device": device, "model": "m", "config": config, "state": state,
            "avg_ms": avg_ms, "init_ms": 1.0, "max_avg_error": err,
            "delegated": delegated, "reason": ""}  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "recommended"),
    [
        ([_row("cpu", 10), _row("gpu-fp16", 4, 1e-3, delegated="5/5")], "gpu-fp16"),
        ([_row("cpu", 10), _row("gpu-fp16", 4, 0.2, delegated="5/5")], "cpu"),  # inaccurate
        ([_row("cpu", 10), _row("nnapi", 12, 0.0, delegated="3/5")], "cpu"),  # split is slower
        ([_row("cpu", 10), _row("hexagon", 2, 0.0, state="failed")], "cpu"),
        ([_row("cpu", 10), _row("gpu-fp32", 6, 1e-4), _row("xnnpack", 5, 0.0)], "xnnpack"),
    ],
)
def test_recommendation(rows, recommended) -> None:
    [entry] = choose(rows)
    assert entry["recommended"] == recommended


def test_table_shows_fallbacks_and_refusals() -> None:
    text = format_choice(
        choose([_row("cpu", 10), _row("nnapi:accelerator=qti-dsp", 3, 0.0, delegated="3/5")]),
        [refusal("android:a14", "hexagon", "Could not create Hexagon delegate")],
    )
    assert "* nnapi:accelerator=qti-dsp" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("* "))
    assert line.split()[-2:] == ["3/5", "2"]
    assert text.endswith("refused: hexagon on android:a14: Could not create Hexagon delegate")
