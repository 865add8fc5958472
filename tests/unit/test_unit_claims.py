"""Unit claims (gpu/opencl/unit_claims.py): when a waiting session may stop waiting."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from delegate_runtime.gpu.opencl.unit_claims import await_claims, claim, claim_settled, mark_done


def _job(tmp_path):
    (tmp_path / "claims").mkdir()
    return tmp_path / "job.json"


def test_a_unit_claimed_by_a_live_builder_is_waited_for_until_done(tmp_path):
    job = _job(tmp_path)
    assert claim(job, 0)
    assert (tmp_path / "claims" / "0").read_text() == str(os.getpid())
    assert not claim_settled(tmp_path / "claims", 0)
    assert await_claims(job, 1, time.monotonic() + 0.1) == 1  # still unsettled at the deadline
    mark_done(job, 0)
    assert claim_settled(tmp_path / "claims", 0)
    assert await_claims(job, 1, time.monotonic() + 5) == 0


def test_a_unit_whose_claimer_is_gone_is_not_waited_for(tmp_path):
    job = _job(tmp_path)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    (tmp_path / "claims" / "0").write_text(gone.stdout.strip())
    start = time.monotonic()
    assert await_claims(job, 1, start + 30) == 0
    assert time.monotonic() - start < 5


def test_a_claim_made_by_another_builder_is_refused(tmp_path):
    job = _job(tmp_path)
    assert claim(job, 0) and claim(job, 1)
    assert not claim(job, 0) and not claim(job, 1)
