"""The farm's tables (SQLAlchemy 2.0). The database is the source of truth.

Migrations live in `farm_core/migrations`; `database.migrate` brings any database to head.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

JsonType = JSON().with_variant(JSONB(), "postgresql")

#: Job states. queued: in the DB, no message yet; dispatched: a message was sent.
QUEUED, DISPATCHED, RUNNING = "queued", "dispatched", "running"
SUCCEEDED, FAILED, TIMED_OUT, CANCELLED = "succeeded", "failed", "timed_out", "cancelled"
ACTIVE_STATES = (QUEUED, DISPATCHED, RUNNING)
TERMINAL_STATES = (SUCCEEDED, FAILED, TIMED_OUT, CANCELLED)

#: The project of campaigns submitted without one (and of every campaign before projects).
DEFAULT_PROJECT = "default"

#: Device health. A quarantined device receives no jobs until its canary passes again.
UNKNOWN, HEALTHY, QUARANTINED = "unknown", "healthy", "quarantined"


def utcnow() -> datetime:
    """Naive UTC now: every timestamp in the farm's database is naive UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JsonType, list[Any]: JsonType}


class StoredModel(Base):
    """A .tflite model, content-addressed by the sha256 of its bytes."""

    __tablename__ = "models"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    size_bytes: Mapped[int] = mapped_column(Integer)
    op_summary: Mapped[dict[str, Any]]
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class InputFile(Base):
    """A campaign's input value file (farm_core.user_inputs), content-addressed."""

    __tablename__ = "input_files"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Device(Base):
    """A device with a stable key (`opencl:<vendor>:<device>`, `android:<serial>`, ...)."""

    __tablename__ = "devices"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), index=True)
    vendor: Mapped[str] = mapped_column(String(128), default="")
    model: Mapped[str] = mapped_column(String(255), default="")
    renderer: Mapped[str] = mapped_column(String(255), default="")
    driver_version: Mapped[str] = mapped_column(String(128), default="")
    api_version: Mapped[str] = mapped_column(String(128), default="")  #: OpenCL / GLES
    android_sdk: Mapped[int | None] = mapped_column(Integer, nullable=True)
    host: Mapped[str] = mapped_column(String(255), default="")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    facts: Mapped[dict[str, Any]] = mapped_column(default=dict)  #: everything discovered
    agent: Mapped[str] = mapped_column(String(255), default="")  #: the agent serving it
    state: Mapped[str] = mapped_column(String(16), default="online")  #: online / offline
    health: Mapped[str] = mapped_column(String(16), default=UNKNOWN)
    health_reason: Mapped[str] = mapped_column(Text, default="")
    health_baseline: Mapped[dict[str, Any]] = mapped_column(default=dict)  #: canary figures
    last_seen: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    registered_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Campaign(Base):
    """Models × a device selector × configurations × run settings."""

    __tablename__ = "campaigns"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    selector: Mapped[str] = mapped_column(Text)
    configs: Mapped[list[Any]]
    models: Mapped[list[Any]]  #: sha256 of each model
    settings: Mapped[dict[str, Any]]  #: num_runs, warmup_runs, diff_runs, time limits...
    priority: Mapped[int] = mapped_column(Integer, default=0)
    cancelled: Mapped[bool] = mapped_column(default=False)
    #: the CI gate's verdict as `submit --wait` kept it (orchestrator.verdicts); {} for none
    gate: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    #: the project (team) it belongs to, and the user who submitted it ("" from the CLI)
    project: Mapped[str] = mapped_column(
        String(64), default=DEFAULT_PROJECT, server_default=DEFAULT_PROJECT
    )
    owner: Mapped[str] = mapped_column(String(64), default="", server_default="")
    #: what submission refused, each {"device", "config", "reason"} (orchestrator.refusals);
    #: None for a campaign submitted before refusals were kept (migration 0011)
    refusals: Mapped[list[Any] | None] = mapped_column(nullable=True, default=None)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Job(Base):
    """One model on one device in one configuration; the unit the farm schedules."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_campaign_state", "campaign_id", "state"),
        Index("ix_jobs_state_device", "state", "device_key"),
        Index("ix_jobs_lineage", "model_name", "device_key", "config"),
        Index("ix_jobs_project_state", "project", "state"),
        # a device's next queued jobs, in the order a fill takes them (farm_core.device_queue)
        Index("ix_jobs_device_queue", "device_key", "state", text("priority DESC"), "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"))
    model_sha256: Mapped[str] = mapped_column(ForeignKey("models.sha256"))
    #: the model's lineage: history is kept by this name across versions (each a sha256)
    model_name: Mapped[str] = mapped_column(String(255), default="", server_default="")
    config: Mapped[str] = mapped_column(String(128))  #: canonical (farm_core.configs)
    #: its campaign's project, repeated for quotas and fair scheduling
    project: Mapped[str] = mapped_column(
        String(64), default=DEFAULT_PROJECT, server_default=DEFAULT_PROJECT
    )
    planned_device: Mapped[str] = mapped_column(ForeignKey("devices.key"))
    device_key: Mapped[str] = mapped_column(ForeignKey("devices.key"))  #: current device
    state: Mapped[str] = mapped_column(String(16), default=QUEUED)
    #: dispatch number: every message sent for the job has its own; only the current claims
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    failures: Mapped[int] = mapped_column(Integer, default=0)  #: infrastructure failures
    priority: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str] = mapped_column(String(255), default="")
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")  #: why it is in its state
    #: a running job's newest progress line (its worker's lease thread writes it)
    progress: Mapped[str] = mapped_column(Text, default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)  #: last state change


class Attempt(Base):
    """What happened to one dispatch of a job (kept for failures and lost messages)."""

    __tablename__ = "attempts"
    __table_args__ = (UniqueConstraint("job_id", "attempt", name="uq_attempts_job_attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    device_key: Mapped[str] = mapped_column(String(255))
    worker: Mapped[str] = mapped_column(String(255), default="")
    outcome: Mapped[str] = mapped_column(String(32))  #: device_error, lost, resent, ...
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Result(Base):
    """The outcome of a job: every figure of the tools, facts and versions as they were."""

    __tablename__ = "results"
    __table_args__ = (UniqueConstraint("job_id", "attempt", name="uq_results_job_attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    campaign_id: Mapped[int] = mapped_column(Integer, index=True)
    model_sha256: Mapped[str] = mapped_column(String(64), index=True)
    device_key: Mapped[str] = mapped_column(String(255), index=True)
    config: Mapped[str] = mapped_column(String(128))  #: canonical (farm_core.configs)
    outcome: Mapped[str] = mapped_column(String(16))  #: the job's final state
    error: Mapped[str] = mapped_column(Text, default="")
    init_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    avg_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    median_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    p95_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_avg_error: Mapped[float | None] = mapped_column(Float, nullable=True)  #: diff, worst out
    delegated_ops: Mapped[int | None] = mapped_column(Integer, nullable=True)
    total_ops: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: the benchmark's peak memory (MB): farm_core.metrics.peak_memory_mb
    peak_memory_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    benchmark: Mapped[dict[str, Any]] = mapped_column(default=dict)  #: BenchmarkResult.to_dict()
    diff: Mapped[dict[str, Any]] = mapped_column(default=dict)  #: DiffResult.to_dict()
    delegation: Mapped[dict[str, Any]] = mapped_column(default=dict)
    device_facts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    versions: Mapped[dict[str, Any]] = mapped_column(default=dict)
    log: Mapped[str] = mapped_column(Text, default="")
    #: how the figures were measured: the configuration record, the conditions (driver,
    #: clocks, host load, CPUs), the timing path and the uncertainty (farm_core.measurement)
    measurement: Mapped[dict[str, Any]] = mapped_column(default=dict)
    #: a digest of the configuration record: results with different ones are never compared
    config_fingerprint: Mapped[str] = mapped_column(
        String(64), default="", server_default="", index=True
    )
    worker: Mapped[str] = mapped_column(String(255), default="")
    duration_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Project(Base):
    """A team sharing the lab, and its quotas (None: no limit)."""

    __tablename__ = "projects"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    max_concurrent_jobs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    device_minutes_per_day: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Reservation(Base):
    """A user's hold on a named device from `starts_at` to `ends_at`: jobs of others wait
    or go elsewhere."""

    __tablename__ = "reservations"
    __table_args__ = (Index("ix_reservations_device_window", "device_key", "ends_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_key: Mapped[str] = mapped_column(ForeignKey("devices.key"))
    user: Mapped[str] = mapped_column(String(64))
    project: Mapped[str] = mapped_column(String(64))
    starts_at: Mapped[datetime] = mapped_column(DateTime)
    ends_at: Mapped[datetime] = mapped_column(DateTime)
    reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    cancelled_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class Artifact(Base):
    """A debug artifact of one job attempt (logcat, a tombstone, the conditions around the
    run): its bytes as kept, at most farm_core.artifacts.MAX_ARTIFACT_BYTES of them
    (`truncated`: `size_bytes` were captured, `note` says which part is kept)."""

    __tablename__ = "artifacts"
    __table_args__ = (
        UniqueConstraint("job_id", "attempt", "name", name="uq_artifacts_job_attempt_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))  #: logcat, tombstone, crash, conditions, ...
    name: Mapped[str] = mapped_column(String(255))  #: the download's file name
    media_type: Mapped[str] = mapped_column(String(64))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    size_bytes: Mapped[int] = mapped_column(Integer)  #: as captured, before any truncation
    truncated: Mapped[bool] = mapped_column(default=False)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class KeptEvidence(Base):
    """One model's allowlist evidence gathered into entries (what no threshold changes), as
    read at `read_at` at one evidence version, for one scope (every project's results, or
    some projects'): a fresh dashboard process reads the rows of the models a page shows
    instead of aggregating their results again. A cache: a new result makes a new version,
    and any row may be deleted."""

    __tablename__ = "kept_evidence"

    scope: Mapped[str] = mapped_column(String(64), primary_key=True)  #: sha256 of the scope
    model: Mapped[str] = mapped_column(String(64), primary_key=True)  #: the model's sha256
    version: Mapped[str] = mapped_column(String(64), primary_key=True)  #: sha256 of it
    data: Mapped[bytes] = mapped_column(LargeBinary)  #: zlib-compressed JSON
    size_bytes: Mapped[int] = mapped_column(Integer)  #: len(data)
    read_at: Mapped[datetime] = mapped_column(DateTime)  #: when the results were read
