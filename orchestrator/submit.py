"""Campaign submission: validate everything first, then store and dispatch in one go.

Every problem with the input (a model that does not parse, a selector that matches no
device, a configuration that no selected device runs, bad settings) is collected and raised
together as a SubmissionError before anything is written: nothing is half-submitted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select, update

from delegate_runtime.errors import DevicefarmError, JobError

from . import jobs
from .configs import RunConfig, parse_configs, supports
from .dispatch import Dispatcher, SendOrder
from .schema import DISPATCHED, QUARANTINED, QUEUED, Campaign, Device, Job, StoredModel, utcnow
from .selectors import parse_selector
from .settings import JOB_HARD_LIMIT_S, VISIBILITY_TIMEOUT_S, Timing

#: Rows per INSERT/UPDATE statement when a campaign is stored.
BATCH_ROWS = 2000
MAX_USER_PRIORITY = 9


class SubmissionError(JobError):
    """The submission is invalid; `errors` lists every problem found."""

    def __init__(self, errors: Sequence[str]):
        self.errors = list(errors)
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
    diff_runs: int = 50  #: inference diff runs for GPU configurations (0: no diff)
    timeout_s: float | None = None  #: soft time limit per job (default: JOB_SOFT_LIMIT_S)

    def errors(self) -> list[str]:
        out = []
        if self.num_runs < 1:
            out.append(f"--runs must be at least 1, not {self.num_runs}")
        if self.warmup_runs < 0:
            out.append(f"warm-up runs must be 0 or more, not {self.warmup_runs}")
        if self.diff_runs < 0:
            out.append(f"diff runs must be 0 or more, not {self.diff_runs}")
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


def read_models(paths: Sequence[str | os.PathLike], errors: list[str]) -> list[_ModelIn]:
    from delegate_runtime import read_model

    models: dict[str, _ModelIn] = {}
    if not paths:
        errors.append("no model given")
    for p in paths:
        path = Path(p)
        try:
            data = path.read_bytes()
        except OSError as exc:
            errors.append(f"model {p}: cannot read it ({exc.strerror or exc})")
            continue
        try:
            model = read_model(data)
        except DevicefarmError as exc:
            errors.append(f"model {p}: {exc}")
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
    alive_since = utcnow() - timedelta(seconds=timing.offline_after_s)
    usable = []
    for r in matched:
        if r["last_seen"] < alive_since:
            warnings.append(f"skipped {r['key']}: offline since {r['last_seen']:%Y-%m-%d %H:%M}")
        elif r["health"] == QUARANTINED:
            warnings.append(f"skipped {r['key']}: quarantined ({r['health_reason']})")
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
        if any(supports(r["kind"], c.name)[0] for r in usable):
            kept.append(c)
            continue
        why = "; ".join(sorted({supports(r["kind"], c.name)[1] for r in usable}))
        if drop_unrun_configs:
            warnings.append(f"skipped configuration {c.name}: no selected device runs it")
        else:
            errors.append(f"configuration {c.name}: no selected device runs it ({why})")
    return usable, kept


def validate(
    engine: Engine,
    model_paths: Sequence[str | os.PathLike],
    selector: str,
    configs: str | Sequence[str],
    settings: RunSettings,
    priority: int,
    timing: Timing,
    drop_unrun_configs: bool = False,
) -> tuple[list[_ModelIn], list[dict[str, Any]], list[RunConfig], list[str]]:
    """Check a submission; raise SubmissionError with every problem, else return its parts."""
    errors: list[str] = []
    warnings: list[str] = []
    models = read_models(model_paths, errors)
    run_configs, config_errors = parse_configs(configs)  # type: ignore[arg-type]
    errors.extend(config_errors)
    errors.extend(settings.errors())
    if not 0 <= priority <= MAX_USER_PRIORITY:
        errors.append(f"--priority must be 0..{MAX_USER_PRIORITY}, not {priority}")
    devices, run_configs = _select_devices(
        engine, selector, run_configs, timing, errors, warnings, drop_unrun_configs
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
) -> Submission:
    """Validate, store a campaign and its jobs in one transaction, then send the jobs."""
    settings = settings or RunSettings()
    timing = timing or Timing.from_env()
    models, devices, run_configs, warnings = validate(
        engine, model_paths, selector, configs, settings, priority, timing, drop_unrun_configs
    )
    now = utcnow()
    pairs = [
        (m.sha256, d["key"], c.name)
        for m in models
        for d in devices
        for c in run_configs
        if supports(d["kind"], c.name)[0]
    ]
    with engine.begin() as conn:
        have = set(
            conn.execute(
                select(StoredModel.sha256).where(StoredModel.sha256.in_([m.sha256 for m in models]))
            ).scalars()
        )
        new = [vars(m) | {"created_at": now} for m in models if m.sha256 not in have]
        if new:
            conn.execute(insert(StoredModel), new)
        campaign_id = conn.execute(
            insert(Campaign)
            .values(
                name=name or ", ".join(m.name for m in models)[:255],
                selector=selector,
                configs=[c.name for c in run_configs],
                models=[m.sha256 for m in models],
                settings=settings.to_json(),
                priority=priority,
                created_at=now,
            )
            .returning(Campaign.id)
        ).scalar_one()
        rows = [
            dict(
                campaign_id=campaign_id,
                model_sha256=sha,
                config=cfg,
                planned_device=key,
                device_key=key,
                state=QUEUED,
                attempt=1,
                failures=0,
                priority=priority,
                worker="",
                reason="",
                created_at=now,
                updated_at=now,
            )
            for sha, key, cfg in pairs
        ]
        ids: list[int] = []
        for i in range(0, len(rows), BATCH_ROWS):
            res = conn.execute(
                insert(Job).returning(Job.id, sort_by_parameter_order=True),
                rows[i : i + BATCH_ROWS],
            )
            ids.extend(res.scalars())
    js = settings.to_json()
    orders = [
        SendOrder(
            jid,
            1,
            key,
            priority,
            soft_limit_s=js.get("soft_limit_s"),
            hard_limit_s=js.get("hard_limit_s"),
        )
        for jid, (_, key, _) in zip(ids, pairs)
    ]
    sent, broker_error = dispatcher.send(orders)
    _mark_dispatched(engine, campaign_id, sent, len(orders), now)
    if broker_error:
        warnings.append(
            f"broker unreachable ({broker_error}); {len(orders) - len(sent)} "
            "jobs stay queued and the reconciler will send them"
        )
    return Submission(
        campaign_id,
        len(orders),
        sorted(d["key"] for d in devices),
        len(sent),
        warnings,
        broker_error,
    )


def _mark_dispatched(
    engine: Engine, campaign_id: int, sent: list[SendOrder], total: int, now: Any
) -> None:
    with engine.begin() as conn:
        if len(sent) == total:  # all of them: one statement
            conn.execute(
                update(Job)
                .where(Job.campaign_id == campaign_id, Job.state == QUEUED, Job.attempt == 1)
                .values(state=DISPATCHED, dispatched_at=now)
            )
        else:
            jobs.mark_sent(conn, sent, now)
