"""The compatibility page's gathered evidence stored in the database per scope and evidence
version (dashboard.evidence_store): a fresh dashboard process reads it instead of the
results while the version holds, recomputes when a new result changes it (at once where
the stored row is over a minute old, else in the background after showing that row), and
shows the same page from either."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, update

from tests.conftest import require_module

require_module("streamlit", "streamlit (the dashboard extra)")
from dashboard import cache, evidence_store, queries  # noqa: E402
from devicefarm.demo_lab import seed  # noqa: E402
from farm_core.schema import KeptEvidence, Result, utcnow  # noqa: E402
from orchestrator.allowlist import export, gathered_json  # noqa: E402
from orchestrator.allowlist.collect import Read, decide_gathered, gather  # noqa: E402
from orchestrator.allowlist.rules import Thresholds  # noqa: E402
from tests.support.farm import add_device, sqlite_engine  # noqa: E402


class Farm:
    """The demo lab's farm, and the projects of each read of its results."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.calls: list[object] = []

    def read(self, engine: Engine, projects: object) -> Read:
        self.calls.append(projects)
        return queries.evidence(engine, projects)

    def fresh(self, thresholds: Thresholds | None = None, projects=None) -> cache.Decided:
        """The allowlists as a dashboard process that keeps nothing yet decides them."""
        cache.forget()
        return cache.allowlists(self.engine, thresholds or Thresholds(), projects, self.read)


@pytest.fixture
def farm(tmp_path: Path) -> Iterator[Farm]:
    engine = sqlite_engine(tmp_path)
    seed(engine, campaigns=2)
    yield Farm(engine)
    cache.forget()
    engine.dispose()


def page(decided: cache.Decided) -> tuple[list, dict]:
    """What the compatibility page shows: the matrix, and each model's list files."""
    files = {
        (sha, fmt): decided.render(sha, fmt)
        for sha in decided.lists
        for fmt in ("devicedb-json", "csv", "json")
    }
    return queries.matrix(decided.lists), files


def age_stored_rows(engine: Engine, seconds: float) -> None:
    """As if every stored row had been read `seconds` earlier."""
    with engine.begin() as conn:  # in Python: SQLite has no datetime arithmetic
        rows = conn.execute(select(KeptEvidence.scope, KeptEvidence.version, KeptEvidence.read_at))
        for scope, version, read_at in rows.all():
            conn.execute(
                update(KeptEvidence)
                .where(KeptEvidence.scope == scope, KeptEvidence.version == version)
                .values(read_at=read_at - timedelta(seconds=seconds))
            )


def new_result(engine: Engine) -> None:
    """A new result: the newest one again, 3x slower."""
    results = Result.__table__
    with engine.begin() as conn:
        newest = dict(
            conn.execute(select(results).order_by(results.c.id.desc())).mappings().first()
        )
        again = newest | {"attempt": 99, "avg_us": 3 * newest["avg_us"]}
        conn.execute(results.insert().values({k: v for k, v in again.items() if k != "id"}))


def stored_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(KeptEvidence)).scalar_one()


def test_the_codec_reads_back_equal_gathered_evidence(farm) -> None:
    engine = farm.engine
    read = queries.evidence(engine)
    gathered = gather(read.rows, read.devices, read.models)
    assert sum(len(e) for e in gathered.entries.values()) > 10  # a farm's worth of entries
    again = gathered_json.loads(gathered_json.dumps(gathered))
    assert again == gathered
    assert decide_gathered(again, Thresholds()) == decide_gathered(gathered, Thresholds())


def test_a_stored_version_is_read_instead_of_the_results(farm) -> None:
    engine, calls = farm.engine, farm.calls
    first = farm.fresh()
    assert calls == [None] and stored_rows(engine) == 1
    second = farm.fresh()
    assert calls == [None]  # the stored row, not the results
    assert second.kept is not first.kept and second.at == first.at  # read when first read
    assert page(second) == page(first)
    strict = Thresholds(min_speedup=3.0, min_runs=2)  # other thresholds decide from it too
    plain = queries.allowlists_from(queries.evidence(engine), strict)
    assert farm.fresh(strict).lists == plain and calls == [None]


def test_a_new_result_changes_the_version_and_the_evidence_is_read_again(farm) -> None:
    engine, calls = farm.engine, farm.calls
    before = farm.fresh()
    new_result(engine)
    age_stored_rows(engine, cache.MAX_AGE_S + 1)  # read over a minute ago: not shown
    after = farm.fresh()
    assert calls == [None, None] and after.kept.version != before.kept.version
    assert after.kept.gathered != before.kept.gathered
    assert stored_rows(engine) == 1  # the older version's row deleted
    cache.forget()
    computed = cache.allowlists(engine, Thresholds(), None, queries.evidence)
    assert page(after) == page(computed)


def test_the_page_is_the_same_from_stored_and_from_computed_evidence(farm) -> None:
    engine, calls = farm.engine, farm.calls
    computed = farm.fresh()
    stored = farm.fresh()
    assert calls == [None]
    assert page(stored) == page(computed)
    assert stored.lists == queries.allowlists_from(queries.evidence(engine), Thresholds())
    assert export.render(stored.lists[next(iter(stored.lists))], "devicedb-bin") == export.render(
        computed.lists[next(iter(computed.lists))], "devicedb-bin"
    )


def test_scopes_are_stored_apart(farm) -> None:
    engine, calls = farm.engine, farm.calls
    farm.fresh()
    farm.fresh(projects=("default",))
    farm.fresh(projects=("default",))
    assert calls == [None, ("default",)] and stored_rows(engine) == 2
    farm.fresh(projects=("*",))  # a project's name never reads as every project
    assert calls[-1] == ("*",) and stored_rows(engine) == 3


def test_two_processes_storing_one_version_keep_one_row(farm) -> None:
    engine = farm.engine
    read = queries.evidence(engine)
    gathered = gather(read.rows, read.devices, read.models)
    version = queries.evidence_version(engine)
    assert evidence_store.store(engine, None, version, gathered, utcnow())
    assert not evidence_store.store(engine, None, version, gathered, utcnow())  # first stands
    assert stored_rows(engine) == 1
    assert evidence_store.load(engine, None, version)[0] == gathered


def test_rows_are_bounded_in_size_and_number(farm, monkeypatch) -> None:
    engine, calls = farm.engine, farm.calls
    monkeypatch.setattr(evidence_store, "MAX_BYTES", 100)
    farm.fresh()
    farm.fresh()
    assert stored_rows(engine) == 0 and calls == [None, None]  # too large: read each time
    monkeypatch.setattr(evidence_store, "MAX_BYTES", 32 * 1024 * 1024)
    monkeypatch.setattr(evidence_store, "ROWS_KEPT", 2)
    for projects in (("a",), ("b",), ("c",)):
        farm.fresh(projects=projects)
    with engine.connect() as conn:
        kept = set(conn.execute(select(KeptEvidence.scope)).scalars())
    assert kept == {evidence_store.scope_key(("b",)), evidence_store.scope_key(("c",))}


def test_an_unreadable_row_is_read_as_absent(farm) -> None:
    engine, calls = farm.engine, farm.calls
    first = farm.fresh()
    with engine.begin() as conn:
        conn.execute(update(KeptEvidence).values(data=b"not zlib"))
    again = farm.fresh()
    assert calls == [None, None] and page(again) == page(first)


def test_a_device_change_changes_the_version(farm) -> None:
    engine, calls = farm.engine, farm.calls
    farm.fresh()
    add_device(engine, "noop:new")
    age_stored_rows(engine, cache.MAX_AGE_S + 1)
    farm.fresh()
    assert calls == [None, None]


def test_a_first_view_shows_a_row_read_within_a_minute_then_reads_again(farm) -> None:
    engine, calls = farm.engine, farm.calls
    before = farm.fresh()
    new_result(engine)
    age_stored_rows(engine, 20)
    shown = farm.fresh()  # a fresh process: the older version's row, read 20 s ago
    assert calls == [None] and shown.kept.version == cache.OLDER
    assert shown.kept.gathered == before.kept.gathered and shown.at == before.at - timedelta(
        seconds=20
    )
    assert time.monotonic() - shown.kept.made_s >= 20  # kept as if read 20 s ago
    again = cache.allowlists(engine, Thresholds(), None, farm.read, max_age_s=20, wait=True)
    assert calls == [None, None] and again.kept.version == queries.evidence_version(engine)
    assert again.kept.gathered != before.kept.gathered
    cache.forget()
    assert page(again) == page(cache.allowlists(engine, Thresholds(), None, queries.evidence))


def test_a_first_view_reads_the_results_where_the_recent_row_is_unreadable(farm) -> None:
    engine, calls = farm.engine, farm.calls
    first = farm.fresh()
    new_result(engine)
    with engine.begin() as conn:  # another code's format, read just now
        conn.execute(update(KeptEvidence).values(data=b"not zlib"))
    again = farm.fresh()
    assert calls == [None, None] and again.kept.version == queries.evidence_version(engine)
    assert again.kept.gathered != first.kept.gathered
