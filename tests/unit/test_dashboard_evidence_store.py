"""The compatibility page's gathered evidence stored in the database per scope, model and
evidence version (dashboard.evidence_store): a fresh dashboard process reads it instead of
the results while the version holds, recomputes when a new result changes it (at once where
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

    def read(self, engine: Engine, projects: object, models: list[str]) -> Read:
        self.calls.append(projects)
        return queries.evidence(engine, projects, models)

    def fresh(self, thresholds: Thresholds | None = None, projects=None) -> cache.Decided:
        """The allowlists as a dashboard process that keeps nothing yet decides them."""
        cache.forget()
        return cache.allowlists(self.engine, thresholds or Thresholds(), projects, read=self.read)

    def models(self) -> int:
        return len(queries.list_models(self.engine))


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
        keys = (KeptEvidence.scope, KeptEvidence.model, KeptEvidence.version)
        for *key, read_at in conn.execute(select(*keys, KeptEvidence.read_at)).all():
            conn.execute(
                update(KeptEvidence)
                .where(*(column == value for column, value in zip(keys, key, strict=True)))
                .values(read_at=read_at - timedelta(seconds=seconds))
            )


def new_result(engine: Engine) -> str:
    """A new result: the newest one again, 3x slower; its model's sha256."""
    results = Result.__table__
    with engine.begin() as conn:
        newest = dict(
            conn.execute(select(results).order_by(results.c.id.desc())).mappings().first()
        )
        again = newest | {"attempt": 99, "avg_us": 3 * newest["avg_us"]}
        conn.execute(results.insert().values({k: v for k, v in again.items() if k != "id"}))
    return newest["model_sha256"]


def stored_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(KeptEvidence)).scalar_one()


def versions(decided: cache.Decided) -> dict:
    return {m: k.version for m, k in decided.kept.items()}


def current(engine: Engine) -> dict:
    """Each model's evidence version now."""
    return queries.evidence_versions(engine, list(queries.list_models(engine)))


def gathered(decided: cache.Decided) -> dict:
    return {m: k.gathered for m, k in decided.kept.items()}


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
    assert calls == [None] and stored_rows(engine) == farm.models() == 4  # a row per model
    second = farm.fresh()
    assert calls == [None]  # the stored rows, not the results
    assert all(second.kept[m] is not first.kept[m] for m in first.kept)
    assert second.at == first.at  # read when first read
    assert page(second) == page(first)
    strict = Thresholds(min_speedup=3.0, min_runs=2)  # other thresholds decide from it too
    plain = queries.allowlists_from(queries.evidence(engine), strict)
    assert farm.fresh(strict).lists == plain and calls == [None]


def test_a_page_of_models_reads_and_stores_its_models_only(farm) -> None:
    engine, calls = farm.engine, farm.calls
    models = list(queries.list_models(engine))
    cache.forget()
    two = cache.allowlists(engine, Thresholds(), None, models[1:3], farm.read)
    assert list(two.lists) == models[1:3] and stored_rows(engine) == 2
    every = queries.allowlists_from(queries.evidence(engine), Thresholds())
    assert two.lists == {m: every[m] for m in models[1:3]}  # as when every model is read
    farm.fresh()
    assert calls == [None, None] and stored_rows(engine) == 4  # the two others read then


def test_a_new_result_changes_its_models_version_and_its_evidence_is_read_again(farm) -> None:
    engine, calls = farm.engine, farm.calls
    before = farm.fresh()
    changed = new_result(engine)
    age_stored_rows(engine, cache.MAX_AGE_S + 1)  # read over a minute ago: not shown
    after = farm.fresh()
    assert calls == [None, None] and versions(after) == current(engine)
    assert {m for m in after.kept if versions(after)[m] != versions(before)[m]} == {changed}
    assert {m for m in after.kept if gathered(after)[m] != gathered(before)[m]} == {changed}
    assert after.kept[changed].at > before.at
    others = [m for m in after.kept if m != changed]
    aged = timedelta(seconds=cache.MAX_AGE_S + 1)
    assert all(after.kept[m].at == before.kept[m].at - aged for m in others)  # rows stand
    assert stored_rows(engine) == 4  # the older version's row deleted
    cache.forget()
    computed = cache.allowlists(engine, Thresholds(), None)
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
    assert calls == [None, ("default",)] and stored_rows(engine) == 8
    farm.fresh(projects=("*",))  # a project's name never reads as every project: no models
    assert farm.fresh(projects=("*",)).lists == {} and stored_rows(engine) == 8


def test_two_processes_storing_one_version_keep_one_row_per_model(farm) -> None:
    engine = farm.engine
    read = queries.evidence(engine)
    gathered = gather(read.rows, read.devices, read.models)
    versions = queries.evidence_versions(engine, list(read.models))
    assert evidence_store.store(engine, None, versions, gathered, utcnow()) == 4
    assert evidence_store.store(engine, None, versions, gathered, utcnow()) == 0  # first stands
    assert stored_rows(engine) == 4
    loaded = evidence_store.load(engine, None, versions)
    assert {m: g.entries[m] for m, (g, _) in loaded.items()} == gathered.entries


def test_rows_are_bounded_in_size_and_in_all(farm, monkeypatch) -> None:
    engine, calls = farm.engine, farm.calls
    monkeypatch.setattr(evidence_store, "MAX_BYTES", 100)
    farm.fresh()
    farm.fresh()
    assert stored_rows(engine) == 0 and calls == [None, None]  # too large: read each time
    monkeypatch.setattr(evidence_store, "MAX_BYTES", 32 * 1024 * 1024)
    farm.fresh(projects=("default",))
    with engine.connect() as conn:
        scope_bytes = conn.execute(select(func.sum(KeptEvidence.size_bytes))).scalar_one()
    monkeypatch.setattr(evidence_store, "BYTES_KEPT", 2 * scope_bytes)
    for projects in (("default", "b"), ("default", "c")):  # the same models and evidence
        farm.fresh(projects=projects)
    with engine.connect() as conn:
        kept = set(conn.execute(select(KeptEvidence.scope)).scalars())
    assert kept == {evidence_store.scope_key(("default", "b")),
                    evidence_store.scope_key(("default", "c"))}  # fmt: skip


def test_an_unreadable_row_is_read_as_absent(farm) -> None:
    engine, calls = farm.engine, farm.calls
    first = farm.fresh()
    with engine.begin() as conn:
        conn.execute(update(KeptEvidence).values(data=b"not zlib"))
    again = farm.fresh()
    assert calls == [None, None] and page(again) == page(first)
    assert stored_rows(engine) == 4  # deleted, then stored again


def test_a_device_change_changes_the_version(farm) -> None:
    engine, calls = farm.engine, farm.calls
    farm.fresh()
    add_device(engine, "noop:new")
    age_stored_rows(engine, cache.MAX_AGE_S + 1)
    farm.fresh()
    assert calls == [None, None]


def test_a_first_view_shows_rows_read_within_a_minute_then_reads_again(farm) -> None:
    engine, calls = farm.engine, farm.calls
    before = farm.fresh()
    changed = new_result(engine)
    age_stored_rows(engine, 20)
    shown = farm.fresh()  # a fresh process: the changed model's older row, read 20 s ago
    assert calls == [None] and versions(shown)[changed] == cache.OLDER
    assert {m: v for m, v in versions(shown).items() if m != changed} == {
        m: v for m, v in current(engine).items() if m != changed
    }  # the others' rows are at their versions
    assert gathered(shown) == gathered(before)
    assert shown.at == before.at - timedelta(seconds=20)
    assert time.monotonic() - shown.kept[changed].made_s >= 20  # kept as if read 20 s ago
    again = cache.allowlists(engine, Thresholds(), None, None, farm.read, max_age_s=20, wait=True)
    assert calls == [None, None] and versions(again) == current(engine)
    assert gathered(again)[changed] != gathered(before)[changed]
    cache.forget()
    assert page(again) == page(cache.allowlists(engine, Thresholds(), None))


def test_a_first_view_reads_the_results_where_the_recent_row_is_unreadable(farm) -> None:
    engine, calls = farm.engine, farm.calls
    first = farm.fresh()
    changed = new_result(engine)
    with engine.begin() as conn:  # another code's format, read just now
        conn.execute(update(KeptEvidence).values(data=b"not zlib"))
    again = farm.fresh()
    assert calls == [None, None] and versions(again) == current(engine)
    assert gathered(again)[changed] != gathered(first)[changed]
