"""A job's debug artifacts in the database: logcat, tombstones, the conditions around a
run, each at most MAX_ARTIFACT_BYTES (the part kept and the size captured are noted).

The tool's full output is already stored with the result (`results.log`, and the op
profile run's in `results.benchmark["profile_log"]`): it is listed here beside the
artifacts and served from there, never copied.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, delete, func, insert, select

from .schema import Artifact, Job, Result

#: The most bytes kept of one artifact (default 4 MiB); the rest is cut and noted.
MAX_ARTIFACT_BYTES = int(os.environ.get("DEVICEFARM_MAX_ARTIFACT_BYTES", str(4 << 20)))
TEXT, JSON_MEDIA = "text/plain; charset=utf-8", "application/json"
#: The names the tool's output is listed under (served from the job's result).
TOOL_OUTPUT, PROFILE_OUTPUT = "tool_output.txt", "tool_output_profile.txt"
#: Characters a stored name keeps (others become `_`): names are download file names.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
NAME_CHARS = 255


@dataclass(frozen=True)
class NewArtifact:
    """An artifact as captured. `keep`: which end survives truncation ("tail" for a log,
    whose end is the crash; "head" for a tombstone, whose top is the signal)."""

    kind: str
    name: str
    data: bytes
    media_type: str = TEXT
    note: str = ""
    keep: str = "head"


@dataclass(frozen=True)
class ArtifactInfo:
    """One listed artifact of a job (stored, or the tool's output from its result)."""

    attempt: int
    kind: str
    name: str
    media_type: str
    size_bytes: int  #: as captured
    stored_bytes: int  #: as kept
    truncated: bool
    note: str
    created_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "kind": self.kind,
            "name": self.name,
            "media_type": self.media_type,
            "size_bytes": self.size_bytes,
            "stored_bytes": self.stored_bytes,
            "truncated": self.truncated,
            "note": self.note,
            "created_at": self.created_at,
        }


def safe_name(name: str) -> str:
    """`name` as a plain file name (no folders, no odd characters), never empty."""
    cleaned = _UNSAFE.sub("_", name.rsplit("/", 1)[-1]).lstrip(".")
    return (cleaned or "artifact")[:NAME_CHARS]


def bounded(item: NewArtifact, limit: int) -> tuple[bytes, bool, str]:
    """The bytes kept of `item` (its head or its tail), whether it was cut, and its note."""
    size = len(item.data)
    if size <= limit:
        return item.data, False, item.note
    part, kept = ("last", item.data[size - limit :]) if item.keep == "tail" else (
        "first", item.data[:limit]
    )  # fmt: skip
    cut = f"truncated: the {part} {limit} of {size} bytes kept"
    return kept, True, f"{item.note}; {cut}" if item.note else cut


def save(
    conn: Connection,
    job_id: int,
    attempt: int,
    items: Iterable[NewArtifact],
    limit: int | None = None,
) -> int:
    """Store `items` for one job attempt (a name stored again replaces the earlier one:
    a replayed save makes no second row); returns how many were stored."""
    limit = MAX_ARTIFACT_BYTES if limit is None else limit
    n = 0
    for item in items:
        name = safe_name(item.name)
        data, truncated, note = bounded(item, limit)
        conn.execute(
            delete(Artifact).where(
                Artifact.job_id == job_id, Artifact.attempt == attempt, Artifact.name == name
            )
        )
        conn.execute(
            insert(Artifact).values(
                job_id=job_id,
                attempt=attempt,
                kind=item.kind[:32],
                name=name,
                media_type=item.media_type[:64],
                data=data,
                size_bytes=len(item.data),
                truncated=truncated,
                note=note,
            )
        )
        n += 1
    return n


def job_project(engine: Engine, job_id: int) -> str | None:
    """The project of a job (None: no such job)."""
    with engine.begin() as conn:
        return conn.execute(select(Job.project).where(Job.id == job_id)).scalar()


def _tool_outputs(conn: Connection, job_id: int) -> list[tuple[ArtifactInfo, bytes]]:
    """The tool's output of each attempt with a result, as its result keeps it."""
    rows = conn.execute(
        select(Result.attempt, Result.log, Result.benchmark, Result.created_at)
        .where(Result.job_id == job_id)
        .order_by(Result.attempt)
    ).all()
    out = []
    for attempt, text, bench, at in rows:
        profile = (bench or {}).get("profile_log") or ""
        for name, body in ((TOOL_OUTPUT, text or ""), (PROFILE_OUTPUT, profile)):
            if body:
                data = str(body).encode("utf-8")
                info = ArtifactInfo(attempt, "tool_output", name, TEXT, len(data), len(data),
                                    False, "as stored with the job's result", at)  # fmt: skip
                out.append((info, data))
    return out


_INFO_COLUMNS = (Artifact.attempt, Artifact.kind, Artifact.name, Artifact.media_type,
                 Artifact.size_bytes, func.length(Artifact.data), Artifact.truncated,
                 Artifact.note, Artifact.created_at)  # fmt: skip


def listing(conn: Connection, job_id: int) -> list[ArtifactInfo]:
    """Every artifact of a job, by attempt: the stored ones, then the tool's output of
    each attempt that has a result (unless that attempt stored its own of that name)."""
    rows = conn.execute(
        select(*_INFO_COLUMNS).where(Artifact.job_id == job_id).order_by(Artifact.id)
    ).all()
    stored = [ArtifactInfo(*row) for row in rows]
    taken = {(i.attempt, i.name) for i in stored}
    outputs = [i for i, _ in _tool_outputs(conn, job_id) if (i.attempt, i.name) not in taken]
    return sorted(stored + outputs, key=lambda info: info.attempt)


def fetch(
    conn: Connection, job_id: int, attempt: int, name: str
) -> tuple[ArtifactInfo, bytes] | None:
    """One artifact and its bytes (None: the job has none of that attempt and name)."""
    row = conn.execute(
        select(*_INFO_COLUMNS, Artifact.data).where(
            Artifact.job_id == job_id, Artifact.attempt == attempt, Artifact.name == name
        )
    ).first()
    if row is not None:
        return ArtifactInfo(*row[:-1]), bytes(row[-1])
    for info, data in _tool_outputs(conn, job_id):
        if info.attempt == attempt and info.name == name:
            return info, data
    return None
