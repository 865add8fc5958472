"""The gathered evidence kept in the database (farm_core.schema.KeptEvidence), one row per
model, so that a fresh dashboard process reads the rows of the models a page shows instead
of aggregating their results (seconds at 1,000 devices; 3 s for the one row of 100 models
that this replaced).

A row is keyed by its scope (the projects whose results it holds; None: all), its model and
the model's evidence version it was read at (queries.evidence_versions): a new result of the
model or a new device fact makes a new version, which the first process to need the model
at it gathers and stores (read after the version was, so never older than it). Of two
processes storing one row at once, the first insert stands and the other's is dropped
(insert-if-absent). A store deletes the older rows of its scope and models, and the oldest
rows past BYTES_KEPT in all; a stored row is at most MAX_BYTES (a larger one stays in its
process only). Failing to store or read loses nothing but time: the page reads the results
as before. A process with nothing kept whose version is not stored may show a model's
newest row read within the last minute (`newest`) while it reads the results in the
background, as a process that kept it would (dashboard.cache).
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from farm_core.schema import KeptEvidence
from orchestrator.allowlist import gathered_json
from orchestrator.allowlist.collect import Gathered

log = logging.getLogger(__name__)

#: The largest compressed row stored, bytes (a model's on a 1,000-device farm: about 0.15 MB).
MAX_BYTES = 32 * 1024 * 1024
#: The stored rows' bytes kept at most (the newest read): 100 models x 1,000 devices is 15 MB.
BYTES_KEPT = 256 * 1024 * 1024

#: One model's stored evidence (its entries in a Gathered of one model) and when it was read.
Stored = tuple[Gathered, datetime]


def scope_key(projects: Any) -> str:
    """The row key of a scope: None (every project) or the projects' names."""
    named = json.dumps(None if projects is None else sorted(projects))  # null, or ["a", ...]
    return hashlib.sha256(named.encode()).hexdigest()


def version_key(version: Any) -> str:
    """The row key of an evidence version, as this code writes it (gathered_json.tag)."""
    return hashlib.sha256(f"{version!r}|{gathered_json.tag()}".encode()).hexdigest()


def load(engine: Engine, projects: Any, versions: Mapping[str, Any]) -> dict[str, Stored]:
    """The evidence of each model (sha256) in `projects` stored at its version in
    `versions`, by model: those stored and readable (an unreadable row is deleted, for a
    store to replace it)."""
    scope = KeptEvidence.scope == scope_key(projects)
    keyed = tuple_(KeptEvidence.model, KeptEvidence.version)
    wanted = [(m, version_key(v)) for m, v in versions.items()]
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(KeptEvidence.model, KeptEvidence.data, KeptEvidence.read_at).where(
                    scope, keyed.in_(wanted)
                )
            ).all()
        out, bad = _decoded(rows)
        if bad:
            with engine.begin() as conn:
                gone = [(m, version_key(versions[m])) for m in bad]
                conn.execute(delete(KeptEvidence).where(scope, keyed.in_(gone)))
        return out
    except SQLAlchemyError as exc:
        log.warning("kept evidence not read (the results are): %s", exc)
        return {}


def newest(
    engine: Engine, projects: Any, since: datetime, models: Collection[str]
) -> dict[str, Stored]:
    """Each of `models`' evidence in `projects` read last, at whatever version, if read at
    `since` or later, by model (an unreadable one left out: its results are read)."""
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(KeptEvidence.model, KeptEvidence.data, KeptEvidence.read_at)
                .where(
                    KeptEvidence.scope == scope_key(projects),
                    KeptEvidence.model.in_(list(models)),
                    KeptEvidence.read_at >= since,
                )
                .order_by(KeptEvidence.read_at)  # the newest last: it stands
            ).all()
        latest = {r.model: r for r in rows}
        return _decoded(latest.values())[0]
    except SQLAlchemyError as exc:
        log.warning("newest kept evidence not read (the results are): %s", exc)
        return {}


def _decoded(rows: Any) -> tuple[dict[str, Stored], list[str]]:
    """Rows (model, data, read_at) decoded by model, and the models whose bytes are not."""
    out, bad = {}, []
    for model, data, read_at in rows:
        try:
            out[model] = gathered_json.loads(data), read_at
        except (ValueError, zlib.error) as exc:  # JSON errors are ValueErrors
            log.warning("kept evidence of %s unreadable (its results are read): %s", model, exc)
            bad.append(model)
    return out, bad


def store(
    engine: Engine,
    projects: Any,
    versions: Mapping[str, Any],
    gathered: Gathered,
    read_at: datetime,
) -> int:
    """Keep each model of `gathered` (of `projects`, read at `read_at`, each at its version
    in `versions`) unless a row of that model and version is there already or it is over
    MAX_BYTES; the number of rows this call stored."""
    scope = scope_key(projects)
    rows = []
    for model, name in gathered.models.items():
        one = Gathered({model: name}, {model: gathered.entries[model]})
        data = gathered_json.dumps(one)
        if len(data) > MAX_BYTES:
            log.warning("kept evidence of %s not stored: %d bytes, over %d", model, len(data),
                        MAX_BYTES)  # fmt: skip
            continue
        rows.append({"scope": scope, "model": model, "version": version_key(versions[model]),
                     "read_at": read_at, "data": data, "size_bytes": len(data)})  # fmt: skip
    if not rows:
        return 0
    keyed = tuple_(KeptEvidence.model, KeptEvidence.version)
    try:
        with engine.begin() as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            added = conn.execute(
                dialect.insert(KeptEvidence).values(rows).on_conflict_do_nothing()
            ).rowcount  # another process stored a row first: the same evidence
            conn.execute(
                delete(KeptEvidence).where(
                    KeptEvidence.scope == scope,
                    KeptEvidence.model.in_([r["model"] for r in rows]),
                    # a row stored first at one of these versions stands
                    keyed.not_in([(r["model"], r["version"]) for r in rows]),
                    KeptEvidence.read_at < read_at,
                )
            )
            _bound(conn)
        return max(added, 0)
    except SQLAlchemyError as exc:
        log.warning("kept evidence not stored: %s", exc)
        return 0


def _bound(conn: Any) -> None:
    """Delete the oldest rows past BYTES_KEPT in all."""
    rows = conn.execute(
        select(KeptEvidence.scope, KeptEvidence.model, KeptEvidence.version,
               KeptEvidence.size_bytes).order_by(KeptEvidence.read_at.desc())
    ).all()  # fmt: skip
    total, past = 0, []
    for scope, model, version, size in rows:
        total += size
        if total > BYTES_KEPT:
            past.append((scope, model, version))
    if past:
        key = tuple_(KeptEvidence.scope, KeptEvidence.model, KeptEvidence.version)
        conn.execute(delete(KeptEvidence).where(key.in_(past)))
