"""Campaign submission: validate everything first, then store and dispatch in one go.

Every problem with the input (a model that does not parse, a selector that matches no
device, a configuration that no selected device runs, bad settings) is collected and raised
together as a SubmissionError before anything is written: nothing is half-submitted.

Input is hostile until checked: a model must be a regular file no larger than the model cap
(checked before a byte is read, so `/dev/zero`, a FIFO or a huge sparse file are refused at
once), and every string stored must fit its column.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select

from delegate_runtime.errors import DevicefarmError, JobError
from farm_core import device_queue, quotas, user_inputs
from farm_core.configs import RunConfig, parse_configs, supports
from farm_core.dispatch import Dispatcher
from farm_core.schema import (
    DEFAULT_PROJECT,
    QUARANTINED,
    Campaign,
    Device,
    InputFile,
    Job,
    StoredModel,
    utcnow,
)
from farm_core.selectors import parse_selector
from farm_core.settings import JOB_HARD_LIMIT_S, VISIBILITY_TIMEOUT_S, Timing
from farm_core.text_safety import string_errors
from farm_core.user_inputs import UserInput

from . import refusals, submit_jobs

MAX_USER_PRIORITY = 9
#: Most runs of each kind a job may ask for (a typo of 10**9 runs would hold a device for days).
MAX_RUNS = 100_000

#: The model cap's default. Models are stored in the database, and PostgreSQL refuses any
#: single allocation over 1 GiB: a 256 MiB bytea already fails at the insert, 128 MiB fits.
DEFAULT_MAX_MODEL_MB = 128
#: Overrides the model cap, in MiB.
ENV_MAX_MODEL_MB = "DEVICEFARM_MAX_MODEL_MB"


def max_model_bytes() -> int:
    """The model size cap: `DEVICEFARM_MAX_MODEL_MB` MiB, else DEFAULT_MAX_MODEL_MB."""
    raw = os.environ.get(ENV_MAX_MODEL_MB, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MODEL_MB
    except ValueError:
        raise JobError(f"{ENV_MAX_MODEL_MB}={raw[:40]!r} is not a number of MiB") from None
    if not 0 < mb <= DEFAULT_MAX_MODEL_MB:
        raise JobError(f"{ENV_MAX_MODEL_MB} must be in (0, {DEFAULT_MAX_MODEL_MB}] MiB, not {mb:g}")
    return int(mb * 1024**2)


def column_length(column: Any) -> int:
    """The most characters a String column holds (String(255) -> 255)."""
    return int(column.type.length)


def model_name_errors(model_name: str, n_models: int, checked: bool = False) -> list[str]:
    """A lineage name names one model: it must fit its column and come with one model
    (`checked`: its characters were already checked, as the campaign's name)."""
    if not model_name:
        return []
    limit = column_length(Job.model_name)
    out = [] if checked else string_errors("the model name", model_name, limit)
    if not model_name.strip():
        out.append("the model name is blank")
    if n_models > 1:
        out.append(
            f"a model name names one model's history, but {n_models} models were given: "
            "submit them one at a time, or without a name (each keeps its file name)"
        )
    return out


def project_errors(project: str) -> list[str]:
    """A project name: as a user name (farm_core.accounts.NAME_RE), at most its column."""
    from farm_core.accounts import NAME_RE

    if NAME_RE.fullmatch(project) and len(project) <= column_length(Campaign.project):
        return []
    return [f"--project {project[:70]!r}: letters, digits and ._@- (at most 64)"]


class SubmissionError(JobError):
    """The submission is invalid; `errors` lists every problem found."""

    def __init__(self, errors: Sequence[str]):
        self.errors = list(errors)
        if len(self.errors) == 1:  # the usual mistake reads as one line
            super().__init__(f"{self.errors[0]}; nothing was submitted")
            return
        super().__init__(
            f"{len(self.errors)} problem(s), nothing was submitted:\n  - "
            + "\n  - ".join(self.errors)
        )


@dataclass(frozen=True)
class RunSettings:
    """How each job measures (mirrors benchmark_model and inference diff flags)."""

    num_runs: int = 50
    warmup_runs: int = 1
    min_secs: float = 1.0
    max_secs: float = 150.0
    diff_runs: int = 20  #: inference diff runs for GPU configurations (0: no diff)
    timeout_s: float | None = None  #: soft time limit per job (default: JOB_SOFT_LIMIT_S)

    def errors(self) -> list[str]:
        out = []
        if not 1 <= self.num_runs <= MAX_RUNS:
            out.append(f"--runs must be at least 1 and at most {MAX_RUNS}, not {self.num_runs}")
        if not 0 <= self.warmup_runs <= MAX_RUNS:
            out.append(
                f"warm-up runs must be 0 or more and at most {MAX_RUNS}, not {self.warmup_runs}"
            )
        if not 0 <= self.diff_runs <= MAX_RUNS:
            out.append(f"diff runs must be 0 or more and at most {MAX_RUNS}, not {self.diff_runs}")
        if self.min_secs < 0 or self.max_secs <= 0 or self.min_secs > self.max_secs:
            out.append(f"need 0 <= min_secs <= max_secs, got {self.min_secs}, {self.max_secs}")
        limit = JOB_HARD_LIMIT_S
        if self.timeout_s is not None and not 0 < self.timeout_s < limit:
            out.append(
                f"--timeout must be in (0, {limit}) s (inside the broker's "
                f"{VISIBILITY_TIMEOUT_S} s visibility timeout), not {self.timeout_s}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if self.timeout_s is not None:
            d["soft_limit_s"] = self.timeout_s
            d["hard_limit_s"] = self.timeout_s + 60
        return d


@dataclass
class Submission:
    """What `submit` stored and sent."""

    campaign_id: int
    jobs: int
    devices: list[str]
    sent: int
    warnings: list[str] = field(default_factory=list)
    broker_error: str = ""


@dataclass(frozen=True)
class _ModelIn:
    sha256: str
    name: str
    size_bytes: int
    op_summary: dict[str, int]
    data: bytes


def read_model_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a model file: a regular file of at most `max_bytes`, checked before reading.

    Raises JobError saying why not (its kind, its size, the OS error)."""
    try:
        # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise JobError(f"cannot read it ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JobError(f"not a regular file ({_file_kind(st.st_mode)})")
        if st.st_size > max_bytes:
            raise JobError(f"{_mib(st.st_size)} is over the {_mib(max_bytes)} model cap")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)  # the file may have grown since fstat
        if len(data) > max_bytes:
            raise JobError(f"grew past the {_mib(max_bytes)} model cap while being read")
        return data
    except OSError as exc:
        raise JobError(f"cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _file_kind(mode: int) -> str:
    kinds = [
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a plain file")


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


def read_models(
    paths: Sequence[str | os.PathLike], errors: list[str], max_bytes: int | None = None
) -> list[_ModelIn]:
    """Read and validate each model (at most `max_bytes` each, default: the model cap)."""
    from delegate_runtime import read_model

    try:
        cap = max_model_bytes() if max_bytes is None else max_bytes
    except JobError as exc:
        errors.append(str(exc))
        return []
    name_limit = column_length(StoredModel.name)
    models: dict[str, _ModelIn] = {}
    if not paths:
        errors.append("no model given")
    for p in paths:
        path = Path(p)
        try:
            data = read_model_file(path, cap)
        except JobError as exc:
            errors.append(f"model {p}: {exc}")
            continue
        try:
            model = read_model(data)
        except DevicefarmError as exc:
            errors.append(f"model {p}: {exc}")
            continue
        name_errors = string_errors("its file name", path.name, name_limit)
        if name_errors:
            errors.extend(f"model {p}: {e}" for e in name_errors)
            continue
        if model.sha256 not in models:
            models[model.sha256] = _ModelIn(
                model.sha256, path.name, len(data), model.op_summary(), data
            )
    return list(models.values())


def _select_devices(
    engine: Engine,
    selector_text: str,
    configs: list[RunConfig],
    timing: Timing,
    errors: list[str],
    warnings: list[str],
    drop_unrun_configs: bool,
    now: datetime,
) -> tuple[list[dict[str, Any]], list[RunConfig]]:
    selector, sel_errors = parse_selector(selector_text)
    errors.extend(sel_errors)
    if selector is None:
        return [], configs
    with engine.begin() as conn:
        rows = [dict(r) for r in conn.execute(select(Device.__table__)).mappings()]
    matched = [r for r in rows if selector.matches(r)]
    if not matched:
        known = ", ".join(sorted(r["key"] for r in rows)) or "none registered"
        errors.append(f"selector {selector_text!r} matches no device (devices: {known})")
        return [], configs
    alive_since = now - timedelta(seconds=timing.offline_after_s)
    usable = []
    for r in matched:
        if r["last_seen"] < alive_since:
            warnings.append(f"skipped {r['key']}: offline since {r['last_seen']:%Y-%m-%d %H:%M}")
        elif r["health"] == QUARANTINED:
            why = (r["health_reason"] or "").splitlines()[0] if r["health_reason"] else ""
            warnings.append(f"skipped {r['key']}: quarantined ({why})")
        else:
            usable.append(r)
    if not usable:
        errors.append(
            f"selector {selector_text!r} matches only offline or quarantined devices: "
            + "; ".join(w.removeprefix("skipped ") for w in warnings)
        )
        return [], configs
    kept = []
    for c in configs:
        if any(supports(r["kind"], c, r.get("facts"))[0] for r in usable):
            kept.append(c)
            continue
        why = "; ".join(sorted({supports(r["kind"], c, r.get("facts"))[1] for r in usable}))
        if drop_unrun_configs:
            warnings.append(f"skipped configuration {c.name}: no selected device runs it")
        else:
            errors.append(f"configuration {c.name}: no selected device runs it ({why})")
    return usable, kept


def placements(
    devices: list[dict[str, Any]], configs: list[RunConfig]
) -> tuple[list[tuple[str, str]], list[dict[str, str]]]:
    """(device, configuration) for every pair a device can run (each model of the campaign
    makes a job on each), and a refusal (orchestrator.refusals) for each device that refuses
    a configuration from its recorded facts (a phone without the Hexagon libraries, without
    the named NNAPI accelerator, ...): its reason, before any job exists. A device kind that
    never runs a configuration is not reported."""
    places, refused = [], []
    for d in devices:
        for c in configs:
            ok, why = supports(d["kind"], c, d.get("facts"))
            if ok:
                places.append((d["key"], c.name))
            elif supports(d["kind"], c)[0]:
                refused.append(refusals.refusal(d["key"], c.name, why))
    return places, refused


def validate(
    engine: Engine,
    model_paths: Sequence[str | os.PathLike],
    selector: str,
    configs: str | Sequence[str],
    settings: RunSettings,
    priority: int,
    timing: Timing,
    drop_unrun_configs: bool = False,
    now: datetime | None = None,
    name: str = "",
    max_model_bytes: int | None = None,
    model_name: str = "",
    project: str = DEFAULT_PROJECT,
) -> tuple[list[_ModelIn], list[dict[str, Any]], list[RunConfig], list[str]]:
    """Check a submission; raise SubmissionError with every problem, else return its parts."""
    errors: list[str] = []
    warnings: list[str] = []
    models = read_models(model_paths, errors, max_model_bytes)
    errors.extend(string_errors("--name", name, column_length(Campaign.name)))
    errors.extend(project_errors(project))
    errors.extend(model_name_errors(model_name, len(model_paths), checked=model_name == name))
    run_configs, config_errors = parse_configs(configs)  # type: ignore[arg-type]
    errors.extend(config_errors)
    errors.extend(settings.errors())
    if not 0 <= priority <= MAX_USER_PRIORITY:
        errors.append(f"--priority must be 0..{MAX_USER_PRIORITY}, not {priority}")
    devices, run_configs = _select_devices(
        engine, selector, run_configs, timing, errors, warnings, drop_unrun_configs, now or utcnow()
    )
    if not run_configs and not config_errors and devices:
        errors.append("none of the configurations runs on the selected devices")
    if errors:
        raise SubmissionError(errors)
    return models, devices, run_configs, warnings


def submit(
    engine: Engine,
    dispatcher: Dispatcher,
    model_paths: Sequence[str | os.PathLike],
    selector: str,
    configs: str | Sequence[str] = "cpu,gpu-fp32,gpu-fp16",
    settings: RunSettings | None = None,
    priority: int = 0,
    name: str = "",
    timing: Timing | None = None,
    drop_unrun_configs: bool = False,
    now: datetime | None = None,
    max_model_bytes: int | None = None,
    inputs: Sequence[str] = (),
    model_name: str = "",
    project: str = DEFAULT_PROJECT,
    owner: str = "",
) -> Submission:
    """Validate, store a campaign and its jobs in one transaction, then send the jobs.

    `now` is when it is submitted (default: now; the demo lab submits in the past).
    `max_model_bytes` caps each model file (default: DEVICEFARM_MAX_MODEL_MB or 128 MiB).
    `inputs`: the user's input values (`LAYER:SHAPE:FILE` or an .npz, farm_core.user_inputs),
    checked against every model and stored by content hash.
    `model_name`: the model's lineage name (one model only): its history is kept by this
    name across versions; default: each model's file name.
    `project`: the project (team) the campaign and its jobs belong to; `owner`: the user
    who submits it (the API's and the dashboard's; "" from the CLI)."""
    settings = settings or RunSettings()
    timing = timing or Timing.from_env()
    now = now or utcnow()
    models, devices, run_configs, warnings = validate(
        engine,
        model_paths,
        selector,
        configs,
        settings,
        priority,
        timing,
        drop_unrun_configs,
        now,
        name=name,
        max_model_bytes=max_model_bytes,
        model_name=model_name,
        project=project,
    )
    with engine.begin() as conn:  # a quota of zero, or today's device-minutes used up
        refused = quotas.submission_errors(conn, project, now)
    if refused:
        raise SubmissionError(refused)
    values = _user_inputs(inputs, models)
    settings_json = settings.to_json() | (
        {user_inputs.INPUTS: [v.setting() for v in values]} if values else {}
    )
    lineage = {m.sha256: model_name or m.name for m in models}
    places, refused = placements(devices, run_configs)
    warnings.extend(f"refused {refusals.line(r)}" for r in refused)
    with engine.begin() as conn:
        have = set(
            conn.execute(
                select(StoredModel.sha256).where(StoredModel.sha256.in_([m.sha256 for m in models]))
            ).scalars()
        )
        new = [vars(m) | {"created_at": now} for m in models if m.sha256 not in have]
        if new:
            conn.execute(insert(StoredModel), new)
        _store_inputs(conn, values, now)
        campaign_id = conn.execute(
            insert(Campaign)
            .values(
                name=name or ", ".join(lineage.values())[:255],
                selector=selector,
                configs=[c.name for c in run_configs],
                models=[m.sha256 for m in models],
                settings=settings_json,
                priority=priority,
                project=project,
                owner=owner[: column_length(Campaign.owner)],
                refusals=refused,
                created_at=now,
            )
            .returning(Campaign.id)
        ).scalar_one()
        ids = submit_jobs.store(
            conn,
            list(lineage.items()),
            places,
            {
                "campaign_id": campaign_id,
                "project": project,
                "priority": priority,
                "created_at": now,
                "updated_at": now,
            },
        )
    # each device's queue takes what its depth allows; the rest are sent as it frees a place
    filled = device_queue.fill(engine, dispatcher, {key for key, _ in places}, now)
    mine = set(ids)
    sent = sum(o.job_id in mine for o in filled.sent)
    broker_error = filled.broker_error
    if broker_error:
        warnings.append(
            f"broker unreachable ({broker_error}); {len(ids) - sent} "
            "jobs stay queued and the reconciler will send them"
        )
    return Submission(
        campaign_id,
        len(ids),
        sorted(d["key"] for d in devices),
        sent,
        warnings,
        broker_error,
    )


def _user_inputs(inputs: Sequence[str], models: Sequence[_ModelIn]) -> list[UserInput]:
    """The checked input values (SubmissionError with every problem found)."""
    if not inputs:
        return []
    from delegate_runtime import read_model

    errors: list[str] = []
    values = user_inputs.read_inputs(inputs, [read_model(m.data) for m in models], errors)
    if errors:
        raise SubmissionError(errors)
    return values


def _store_inputs(conn: Any, values: Sequence[UserInput], now: datetime) -> None:
    """Store each input file once, by its sha256."""
    shas = {v.sha256: v for v in values}
    have = set(
        conn.execute(select(InputFile.sha256).where(InputFile.sha256.in_(list(shas)))).scalars()
    )
    new = [
        {"sha256": sha, "size_bytes": len(v.data), "data": v.data, "created_at": now}
        for sha, v in shas.items()
        if sha not in have
    ]
    if new:
        conn.execute(insert(InputFile), new)
