"""Statements over thousands of (job id, attempt) pairs on PostgreSQL (farm_core.pair_chunks).

A 1,000-device campaign's first fill takes 8,000 jobs at once; in one `(id, attempt) IN`
list PostgreSQL's planner ran out of stack ("stack depth limit exceeded") and the whole
submission failed."""

from __future__ import annotations

import pytest

from farm_core import jobs
from farm_core.database import open_database
from farm_core.schema import utcnow

pytestmark = pytest.mark.integration


def test_taking_eight_thousand_jobs_at_once_is_planned(pg_url: str) -> None:
    engine = open_database(pg_url)
    pairs = [(job_id, 1) for job_id in range(1, 8001)]  # none queued: nothing is taken
    with engine.begin() as conn:
        assert jobs.take_many(conn, pairs, utcnow()) == set()
    engine.dispose()
