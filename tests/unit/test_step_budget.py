"""scripts/step_budget.py: the test command fails when its test step outgrows the budget."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "step_budget.py"


def budget(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=30
    )


def test_a_test_step_over_its_budget_fails_the_run_and_says_why() -> None:
    over = budget("tests", "100000", "warm")
    assert over.returncode == 1
    assert "OVER" in over.stderr and "--durations=30" in over.stderr


def test_a_test_step_within_its_budget_passes() -> None:
    within = budget("tests", "60", "cold")
    assert within.returncode == 0, within.stderr
    assert "within" in within.stdout


def test_a_misspelt_cache_state_is_a_usage_error() -> None:
    assert budget("tests", "60", "lukewarm").returncode == 2


def test_the_test_command_checks_its_test_step_and_its_total() -> None:
    script = (REPO / "scripts" / "test.sh").read_text()
    assert 'step_budget.py tests $((SECONDS - step_start)) "$caches"' in script
    assert 'step_budget.py total "$SECONDS" "$total_caches"' in script
    # a run that builds the Keras zoo is judged as a cold one, whatever the kernel caches
    zoo_branch = script[script.index('if [ -n "$keras_out" ]; then') :]
    assert zoo_branch.splitlines()[1].strip() == "total_caches=cold"
