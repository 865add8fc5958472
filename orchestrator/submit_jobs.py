"""Storing a campaign's jobs: every model on every placement (device, configuration).

A campaign's jobs are the product of its models and its placements, so PostgreSQL gets
the two lists as arrays and makes the rows itself: one INSERT ... SELECT of 100,000 jobs
instead of 100,000 rows of parameters. Other databases (SQLite, the embedded mode) take
the rows in executemany batches. Either way the rows go in in the product's order (model,
then placement), so their ids ascend that way, and the device queues serve ties by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ARRAY, Connection, Integer, String, bindparam, func, insert, literal, select

from farm_core.schema import QUEUED, Job

#: Rows per INSERT statement where the rows are sent (not PostgreSQL).
BATCH_ROWS = 2000
JOBS = Job.__table__
#: Columns every job of one submission shares, bound once.
_SHARED = ("campaign_id", "project", "priority", "created_at", "updated_at")


def store(
    conn: Connection,
    models: Sequence[tuple[str, str]],
    places: Sequence[tuple[str, str]],
    shared: dict[str, Any],
    on_server: bool | None = None,
) -> list[int]:
    """Insert a queued job for each (sha256, lineage name) in `models` on each (device key,
    configuration) in `places`; `shared` holds the values of `_SHARED`. Returns the new ids.

    `on_server`: let PostgreSQL make the rows (default: on PostgreSQL)."""
    if not models or not places:
        return []
    if conn.dialect.name == "postgresql" if on_server is None else on_server:
        return _expand_on_server(conn, models, places, shared)
    rows = [
        {**shared, **_fixed(), "model_sha256": sha, "model_name": name,
         "config": cfg, "planned_device": key, "device_key": key}
        for sha, name in models
        for key, cfg in places
    ]  # fmt: skip
    ids: list[int] = []
    for i in range(0, len(rows), BATCH_ROWS):
        res = conn.execute(
            insert(JOBS).returning(JOBS.c.id, sort_by_parameter_order=True),
            rows[i : i + BATCH_ROWS],
        )
        ids.extend(res.scalars())
    return ids


def _fixed() -> dict[str, Any]:
    """What every new job starts with."""
    return {"state": QUEUED, "attempt": 1, "failures": 0, "worker": "", "reason": ""}


def _expand_on_server(
    conn: Connection,
    models: Sequence[tuple[str, str]],
    places: Sequence[tuple[str, str]],
    shared: dict[str, Any],
) -> list[int]:
    texts = ARRAY(String)
    m = (
        func.unnest(
            bindparam("shas", [s for s, _ in models], type_=texts),
            bindparam("names", [n for _, n in models], type_=texts),
        )
        .table_valued("sha", "name", with_ordinality="i")
        .render_derived(name="m")
    )
    p = (
        func.unnest(
            bindparam("keys", [k for k, _ in places], type_=texts),
            bindparam("cfgs", [c for _, c in places], type_=texts),
        )
        .table_valued("key", "cfg", with_ordinality="j")
        .render_derived(name="p")
    )
    values: dict[str, Any] = {c: literal(shared[c], JOBS.c[c].type) for c in _SHARED}
    values |= {c: literal(v, JOBS.c[c].type) for c, v in _fixed().items()}
    values |= {
        "model_sha256": m.c.sha,
        "model_name": m.c.name,
        "config": p.c.cfg,
        "planned_device": p.c.key,
        "device_key": p.c.key,
    }
    rows = (
        select(*values.values())
        .select_from(m.join(p, literal(True)))
        .order_by(m.c.i.cast(Integer), p.c.j.cast(Integer))
    )
    stmt = insert(JOBS).from_select(list(values), rows).returning(JOBS.c.id)
    return list(conn.execute(stmt).scalars())
