"""The gathered evidence kept in the database (farm_core.schema.KeptEvidence), so that a
fresh dashboard process reads one row instead of aggregating every result (seconds at
1,000 devices).

A row is keyed by its scope (the projects whose results it holds; None: all) and the
evidence version it was read at (queries.evidence_version): a new result, model or device
fact makes a new version, which the first process to need it gathers and stores (read
after the version was, so never older than it). Of two processes storing one version at
once, the first insert stands and the other's is dropped (insert-if-absent). A store deletes its scope's rows read before it,
and the rows past ROWS_KEPT; a stored row is at most MAX_BYTES (a larger one stays in its
process only). Failing to store or read loses nothing but time: the page reads the
results as before. A process with nothing kept whose version is not stored may show the
scope's newest row read within the last minute (`newest`) while it reads the results in
the background, as a process that kept it would (dashboard.cache).
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, delete, insert, select, tuple_
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from farm_core.schema import KeptEvidence
from orchestrator.allowlist import gathered_json
from orchestrator.allowlist.collect import Gathered

log = logging.getLogger(__name__)

#: The largest compressed evidence stored, bytes (a 1,000-device farm's: about 0.7 MB).
MAX_BYTES = 32 * 1024 * 1024
#: Rows kept at most (the newest read): one per scope in use, and a few racing versions.
ROWS_KEPT = 64


def scope_key(projects: Any) -> str:
    """The row key of a scope: None (every project) or the projects' names."""
    named = json.dumps(None if projects is None else sorted(projects))  # null, or ["a", ...]
    return hashlib.sha256(named.encode()).hexdigest()


def version_key(version: Any) -> str:
    """The row key of an evidence version, as this code writes it (gathered_json.tag)."""
    return hashlib.sha256(f"{version!r}|{gathered_json.tag()}".encode()).hexdigest()


def load(engine: Engine, projects: Any, version: Any) -> tuple[Gathered, datetime] | None:
    """The evidence of `projects` stored at `version` and when it was read; None if none."""
    key = (KeptEvidence.scope == scope_key(projects), KeptEvidence.version == version_key(version))
    try:
        with engine.connect() as conn:
            row = conn.execute(select(KeptEvidence.data, KeptEvidence.read_at).where(*key)).first()
        if row is None:
            return None
        try:
            return gathered_json.loads(row.data), row.read_at
        except (ValueError, zlib.error) as exc:  # JSON errors are ValueErrors
            log.warning("kept evidence unreadable, deleted (the results are read): %s", exc)
            with engine.begin() as conn:
                conn.execute(delete(KeptEvidence).where(*key))  # for a store to replace it
            return None
    except SQLAlchemyError as exc:
        log.warning("kept evidence not read (the results are): %s", exc)
        return None


def newest(engine: Engine, projects: Any, since: datetime) -> tuple[Gathered, datetime] | None:
    """The evidence of `projects` read last, at whatever version, if read at `since` or
    later, and when it was read; None if none (or unreadable: the results are read)."""
    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(KeptEvidence.data, KeptEvidence.read_at)
                .where(KeptEvidence.scope == scope_key(projects), KeptEvidence.read_at >= since)
                .order_by(KeptEvidence.read_at.desc())
                .limit(1)
            ).first()
        return None if row is None else (gathered_json.loads(row.data), row.read_at)
    except (SQLAlchemyError, ValueError, zlib.error) as exc:
        log.warning("newest kept evidence not read (the results are): %s", exc)
        return None


def store(
    engine: Engine, projects: Any, version: Any, gathered: Gathered, read_at: datetime
) -> bool:
    """Keep `gathered` (of `projects`, read at `read_at` at `version`) unless a row of that
    version is there already or it is over MAX_BYTES; True when this call stored it."""
    data = gathered_json.dumps(gathered)
    if len(data) > MAX_BYTES:
        log.warning("kept evidence not stored: %d bytes, over %d", len(data), MAX_BYTES)
        return False
    scope = scope_key(projects)
    row = {"scope": scope, "version": version_key(version), "read_at": read_at}
    try:
        try:
            with engine.begin() as conn:
                conn.execute(insert(KeptEvidence).values(**row, data=data, size_bytes=len(data)))
        except IntegrityError:  # another process stored this version first: the same evidence
            return False
        with engine.begin() as conn:
            conn.execute(
                delete(KeptEvidence).where(
                    KeptEvidence.scope == scope, KeptEvidence.read_at < read_at
                )
            )
            past = conn.execute(
                select(KeptEvidence.scope, KeptEvidence.version)
                .order_by(KeptEvidence.read_at.desc())
                .offset(ROWS_KEPT)
            ).all()
            if past:
                key = tuple_(KeptEvidence.scope, KeptEvidence.version)
                conn.execute(delete(KeptEvidence).where(key.in_([tuple(r) for r in past])))
        return True
    except SQLAlchemyError as exc:
        log.warning("kept evidence not stored: %s", exc)
        return False
