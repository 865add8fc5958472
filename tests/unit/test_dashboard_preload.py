"""A dashboard process loads the pages' chart libraries as it starts (serve.py runs
dashboard/preload.py), so that no first view waits for them (issue 44)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")

REPO = Path(__file__).resolve().parents[2]


def test_serving_loads_the_chart_libraries_before_any_view() -> None:
    code = "import sys, dashboard.serve; print('altair' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


def test_without_it_they_are_not_loaded() -> None:  # the check above can fail
    code = "import sys, dashboard.auth; print('altair' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]
