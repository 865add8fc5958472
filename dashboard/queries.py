"""Every query the dashboard runs: plain functions of an Engine, tested without Streamlit.

Lists of dicts come back (pages turn them into tables and charts). Figures are aggregated
in SQL; JSON columns are read only for the latest result of each device and configuration,
so pages stay fast on a large database.

`projects` (the viewer's, dashboard.auth.Viewer.projects; None: every project) limits what
a query sees to the campaigns, results and models of those projects (orchestrator.scope).
Devices are the lab's: every viewer sees them, but not another project's job on them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Text, case, cast, func, select

from farm_core import metrics
from farm_core.schema import (
    DEFAULT_PROJECT,
    FAILED,
    RUNNING,
    SUCCEEDED,
    TERMINAL_STATES,
    TIMED_OUT,
    Campaign,
    Device,
    Job,
    Result,
    StoredModel,
    utcnow,
)
from farm_core.settings import Timing
from orchestrator import history as cell_history
from orchestrator import provenance, regression
from orchestrator.allowlist.collect import (
    Allowlist,
    Read,
    build_allowlists,
    decide_models,
    read_evidence,
)
from orchestrator.allowlist.rules import Thresholds
from orchestrator.scope import Projects, models_of, of_projects, results_of

#: Largest model accepted from an upload.
MAX_UPLOAD_BYTES = 512 * 1024 * 1024
#: A .tflite file's flatbuffer identifier, at bytes 4..8.
TFLITE_MAGIC = b"TFL3"


def _ms(us: float | None) -> float | None:
    return None if us is None else float(us) / 1000.0


# -- fleet ---------------------------------------------------------------------------------


#: The current job of a device busy with another project's job.
OTHER_PROJECT_JOB = "(another project's job)"


def fleet(
    engine: Engine, now: datetime | None = None, projects: Projects = None
) -> list[dict[str, Any]]:
    """Every device: host, kind, state (offline when its heartbeat is late), health, last
    seen, and the job it is running (another project's: OTHER_PROJECT_JOB)."""
    now = now or utcnow()
    late = now - timedelta(seconds=Timing.from_env().offline_after_s)
    with engine.begin() as conn:
        devices = conn.execute(
            select(
                Device.key,
                Device.host,
                Device.kind,
                Device.vendor,
                Device.model,
                Device.driver_version,
                Device.state,
                Device.health,
                Device.health_reason,
                Device.last_seen,
            ).order_by(Device.host, Device.kind, Device.key)
        ).mappings()
        devices = [dict(d) for d in devices]
        running = conn.execute(
            select(
                Job.device_key,
                Job.id,
                Job.config,
                StoredModel.name,
                Job.started_at,
                Job.project,
            )
            .join(StoredModel, StoredModel.sha256 == Job.model_sha256)
            .where(Job.state == RUNNING)
        ).all()
    jobs = {
        r.device_key: f"#{r.id} {r.name} ({r.config})"
        if projects is None or r.project in projects
        else OTHER_PROJECT_JOB
        for r in running
    }
    for d in devices:
        d["state"] = "offline" if d["last_seen"] < late else d["state"]
        d["current_job"] = jobs.get(d["key"], "")
    return devices


# -- campaigns -----------------------------------------------------------------------------


def campaigns(engine: Engine, projects: Projects = None) -> list[dict[str, Any]]:
    """The newest campaigns (of `projects`) with their project, owner, jobs by state and
    progress (0..1)."""
    from orchestrator.report import campaign_counts

    rows = campaign_counts(engine, projects=projects)
    for r in rows:
        s = r["states"]
        done = sum(s.get(k, 0) for k in TERMINAL_STATES)
        r["progress"] = done / r["jobs"] if r["jobs"] else 0.0
        r["failed"] = s.get(FAILED, 0) + s.get(TIMED_OUT, 0)
        for k in ("queued", "dispatched", "running", "succeeded"):
            r[k] = s.get(k, 0)
        r["cancelled_jobs"] = s.get("cancelled", 0)
    return rows


def campaign_failures(
    engine: Engine, campaign_id: int, projects: Projects = None
) -> list[dict[str, Any]]:
    """A campaign's failed and timed-out jobs with their reasons (none for a campaign not
    of `projects`)."""
    with engine.begin() as conn:
        rows = conn.execute(
            select(
                Job.id.label("job"),
                # the lineage name (`submit --name`), else the file name
                case((Job.model_name != "", Job.model_name), else_=StoredModel.name).label("model"),
                Job.device_key.label("device"),
                Job.config,
                Job.state,
                Job.failures,
                Job.reason,
            )
            .join(StoredModel, StoredModel.sha256 == Job.model_sha256)
            .where(
                Job.campaign_id == campaign_id,
                Job.state.in_((FAILED, TIMED_OUT)),
                of_projects(Job.project, projects),
            )
            .order_by(Job.id)
        ).mappings()
        return [
            dict(r) | {"reason": next(iter((r["reason"] or "").splitlines()), "")} for r in rows
        ]


def delegate_choice(
    engine: Engine, campaign_id: int, projects: Projects = None
) -> dict[str, Any] | None:
    """Which delegate per device and model in a campaign (orchestrator.delegate_choice):
    `entries`, each with its configurations' figures and `recommended`, and `refused`,
    the refusals submission kept (None: no record). None for a campaign not of `projects`
    (or none at all)."""
    from orchestrator.delegate_choice import choose
    from orchestrator.refusals import stored
    from orchestrator.report import campaign_rows

    with engine.begin() as conn:
        visible = conn.execute(
            select(Campaign.id).where(
                Campaign.id == campaign_id, of_projects(Campaign.project, projects)
            )
        ).scalar()
        if visible is None:
            return None
        refused = stored(conn, campaign_id)
    return {"entries": choose(campaign_rows(engine, campaign_id)), "refused": refused}


def campaign_jobs(engine: Engine, campaign_id: int, projects: Projects = None) -> list[int]:
    """A campaign's job ids, failed and timed-out ones first (none for a campaign not of
    `projects`)."""
    with engine.begin() as conn:
        rows = conn.execute(
            select(Job.id, Job.state)
            .where(Job.campaign_id == campaign_id, of_projects(Job.project, projects))
            .order_by(Job.id)
        ).all()
    return [i for i, s in rows if s in (FAILED, TIMED_OUT)] + [
        i for i, s in rows if s not in (FAILED, TIMED_OUT)
    ]


def _job_visible(conn: Any, job_id: int, projects: Projects) -> bool:
    found = conn.execute(
        select(Job.id).where(Job.id == job_id, of_projects(Job.project, projects))
    ).first()
    return found is not None


def job_artifacts(engine: Engine, job_id: int, projects: Projects = None) -> list[dict[str, Any]]:
    """A job's debug artifacts (farm_core.artifacts.listing; none for a job not of
    `projects`)."""
    from farm_core import artifacts

    with engine.begin() as conn:
        if not _job_visible(conn, job_id, projects):
            return []
        return [i.to_dict() for i in artifacts.listing(conn, job_id)]


def artifact_bytes(
    engine: Engine, job_id: int, attempt: int, name: str, projects: Projects = None
) -> bytes | None:
    """One artifact's bytes as kept (None: no such artifact, or a job not of `projects`)."""
    from farm_core import artifacts

    with engine.begin() as conn:
        if not _job_visible(conn, job_id, projects):
            return None
        found = artifacts.fetch(conn, job_id, attempt, name)
    return None if found is None else found[1]


def selectable_devices(engine: Engine) -> list[str]:
    with engine.begin() as conn:
        return list(conn.execute(select(Device.key).order_by(Device.key)).scalars())


@dataclass
class Upload:
    """A model upload checked before submission: `errors` empty when it is usable."""

    name: str
    size: int
    errors: list[str]


def check_upload(name: str, data: bytes) -> Upload:
    """Size, flatbuffer magic and a full parse of an uploaded .tflite file."""
    errors = []
    if not data:
        errors.append("the file is empty")
    elif len(data) > MAX_UPLOAD_BYTES:
        errors.append(
            f"the file is {len(data) / 2**20:.0f} MiB, above {MAX_UPLOAD_BYTES >> 20} MiB"
        )
    elif len(data) < 8 or data[4:8] != TFLITE_MAGIC:
        errors.append("not a .tflite file (no TFL3 identifier at byte 4)")
    else:
        from delegate_runtime import read_model
        from delegate_runtime.errors import DevicefarmError

        try:
            read_model(data)
        except DevicefarmError as exc:
            errors.append(f"the model does not parse: {exc}")
    return Upload(name, len(data), errors)


def submit_upload(
    engine: Engine,
    dispatcher: Any,
    name: str,
    data: bytes,
    selector: str,
    configs: Sequence[str],
    campaign_name: str = "",
    project: str = DEFAULT_PROJECT,
    owner: str = "",
) -> Any:
    """Submit a campaign for an uploaded model through the spine's `submit` (which raises
    SubmissionError listing every problem, before anything is written), in `project`, by
    `owner` (the viewer)."""
    from orchestrator.submit import SubmissionError, submit

    upload = check_upload(name, data)
    if upload.errors:
        raise SubmissionError([f"model {name}: {e}" for e in upload.errors])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / os.path.basename(name or "model.tflite")
        path.write_bytes(data)
        return submit(
            engine,
            dispatcher,
            [path],
            selector,
            list(configs),
            name=campaign_name,
            project=project,
            owner=owner,
        )


# -- models --------------------------------------------------------------------------------


def models(engine: Engine, projects: Projects = None) -> list[dict[str, Any]]:
    """Stored models that have results (of `projects`), newest first, each with
    `lineages`: the names its jobs (of `projects`) ran under (`submit --name`, else the
    file name), as History lists them."""
    with engine.begin() as conn:
        # a probe of the model's index per stored model, not a DISTINCT over every result
        measured = select(Result.id).where(
            Result.model_sha256 == StoredModel.sha256, results_of(projects)
        )
        rows = conn.execute(
            select(StoredModel.sha256, StoredModel.name, StoredModel.size_bytes)
            .where(measured.exists())
            .order_by(StoredModel.created_at.desc(), StoredModel.name)
        ).mappings()
        out = [dict(r) for r in rows]
        names: dict[str, set[str]] = {}
        lineage = select(Job.model_sha256, Job.model_name).where(of_projects(Job.project, projects))
        for sha, name in conn.execute(lineage.distinct()):
            if name:
                names.setdefault(sha, set()).add(name)
    for m in out:
        m["lineages"] = sorted(names.get(m["sha256"], ())) or [m["name"]]
    return out


def _latest_ids(model: str, gpu_only: bool = True, projects: Projects = None) -> Any:
    """Subquery: the newest successful result's (of `projects`) id per device and
    configuration."""
    q = select(func.max(Result.id).label("id")).where(
        Result.model_sha256 == model, Result.outcome == SUCCEEDED, results_of(projects)
    )
    if gpu_only:
        q = q.where(Result.config != "cpu")
    return q.group_by(Result.device_key, Result.config).subquery()


# -- compare devices -----------------------------------------------------------------------


#: `configuration` of a compare row measured under the newest configuration record of its
#: device and configuration, and of one measured under an older, different one.
CURRENT, OTHER = "current", "other configuration"


def compare(engine: Engine, model: str, projects: Projects = None) -> list[dict[str, Any]]:
    """Per device, configuration and configuration fingerprint (results measured under
    different switches are never averaged together): latency, speed-up over the CPU, init
    cold vs cached (programs from the kernel cache or not), peak memory, the timing path,
    and `configuration`: CURRENT for the newest fingerprint of the device and
    configuration, OTHER for older ones. Speed-ups use the CURRENT rows' CPU baselines;
    `no_baseline` says why a row has none (`metrics.no_baseline_reason`: a phone without a
    cpu run of its own), "" where it has one. Results of `projects` only."""
    cached = Result.benchmark["program_from_cache"].as_boolean()
    # the stored figure (farm_core.metrics.peak_memory_mb); results older than its column
    # fall back to their record's, where it was measured (the tools print -1 otherwise)
    recorded = Result.benchmark["memory"]["peak_mb"].as_float()
    peak = func.coalesce(Result.peak_memory_mb, case((recorded >= 0, recorded)))
    with engine.begin() as conn:
        rows = conn.execute(
            select(
                Result.device_key.label("device"),
                Result.config,
                Result.config_fingerprint,
                func.max(Result.id).label("newest"),
                func.count().label("results"),
                func.avg(Result.avg_us).label("avg_us"),
                # the fastest result's median: never above the mean median beside it
                func.min(func.coalesce(Result.median_us, Result.avg_us)).label("best_us"),
                func.avg(Result.median_us).label("median_us"),
                func.avg(Result.p95_us).label("p95_us"),
                func.avg(case((cached.is_(False), Result.init_us))).label("cold_us"),
                func.avg(case((cached.is_(True), Result.init_us))).label("cached_us"),
                func.avg(Result.init_us).label("init_us"),
                func.avg(peak).label("peak_mb"),
            )
            .where(Result.model_sha256 == model, Result.outcome == SUCCEEDED, results_of(projects))
            .group_by(Result.device_key, Result.config, Result.config_fingerprint)
        ).mappings()
        rows = [dict(r) for r in rows]
        timing = dict(  # JSON read for the newest result of each row only
            conn.execute(
                select(Result.id, Result.measurement["timing"]["path"].as_string()).where(
                    Result.id.in_([r["newest"] for r in rows])
                )
            ).all()
        )
        places = {r.key: r for r in conn.execute(select(Device.key, Device.host, Device.kind))}
    rows.sort(key=lambda r: (r["device"], r["config"], -r["newest"]))
    newest: dict[tuple[str, str], int] = {}  # the newest result of each device and config
    for r in rows:
        newest.setdefault((r["device"], r["config"]), r["newest"])
    current_ids = set(newest.values())
    current = [r for r in rows if r["newest"] in current_ids]
    measured = [
        {"model": model, "device": r["device"], "config": r["config"], "avg_us": r["avg_us"]}
        | (
            {"host": places[r["device"]].host, "kind": places[r["device"]].kind}
            if r["device"] in places
            else {}
        )
        for r in current
    ]
    base = metrics.baselines(measured)
    out = []
    for r in rows:
        cpu_us = base.get((model, r["device"]))
        kind = places[r["device"]].kind if r["device"] in places else None
        out.append(
            {
                "device": r["device"],
                "config": r["config"],
                "configuration": CURRENT if r["newest"] in current_ids else OTHER,
                "config_fingerprint": r["config_fingerprint"] or "",
                "timing": timing.get(r["newest"]),
                "result": r["newest"],
                "results": r["results"],
                "avg_ms": _ms(r["avg_us"]),
                "best_ms": _ms(r["best_us"]),
                "median_ms": _ms(r["median_us"]),
                "p95_ms": _ms(r["p95_us"]),
                "speedup": metrics.speedup(cpu_us, r["avg_us"]),
                "no_baseline": "" if cpu_us else metrics.no_baseline_reason(kind),
                "init_cold_ms": _ms(r["cold_us"]),
                "init_cached_ms": _ms(r["cached_us"]),
                "init_ms": _ms(r["init_us"]),
                "peak_mb": r["peak_mb"],
            }
        )
    return out


def op_profile(
    engine: Engine,
    model: str,
    device: str,
    config: str,
    result: int | None = None,
    projects: Projects = None,
) -> list[dict[str, Any]]:
    """The per-op profile of the latest successful result of a model on a device in a
    configuration (or of result `result`): one row per node in run order (node, op,
    backend, avg_ms, first_ms, times_called), as the runners store it; empty when that
    result has none."""
    with engine.begin() as conn:
        record = conn.execute(
            select(Result.benchmark["op_profile_nodes"])
            .where(
                Result.model_sha256 == model,
                Result.device_key == device,
                Result.config == config,
                Result.outcome == SUCCEEDED,
                results_of(projects),
                *([] if result is None else [Result.id == result]),
            )
            .order_by(Result.id.desc())
            .limit(1)
        ).scalar()
    return [dict(r) for r in record or [] if isinstance(r, dict)]


def measurement(engine: Engine, result_id: int, projects: Projects = None) -> dict[str, Any] | None:
    """How one result was measured: its fingerprint and timing path, its configuration
    record (switch, value, source), conditions (flat: `clocks_mhz.sm`) and uncertainty;
    empty parts for results from before the record; None when there is no such result (of
    `projects`)."""
    with engine.begin() as conn:
        r = conn.execute(
            select(
                Result.device_key,
                Result.config,
                Result.created_at,
                Result.config_fingerprint,
                Result.measurement,
            ).where(Result.id == result_id, results_of(projects))
        ).first()
    if r is None:
        return None
    m = r.measurement or {}
    return {
        "result": result_id,
        "device": r.device_key,
        "config": r.config,
        "measured": r.created_at,
        "config_fingerprint": r.config_fingerprint or "",
        "timing": provenance.timing_path(m),
        "median_ci_ms": provenance.median_ci_ms(m),
        "switches": provenance.config_rows(m),
        "conditions": provenance.conditions(m),
        "uncertainty": provenance.uncertainty(m),
    }


# -- accuracy ------------------------------------------------------------------------------


def accuracy(engine: Engine, model: str, projects: Projects = None) -> list[dict[str, Any]]:
    """Per device, GPU configuration and output: the newest inference diff's errors (of
    `projects`), and task accuracy (`diff.task_accuracy`) where it was measured."""
    latest = _latest_ids(model, projects=projects)
    with engine.begin() as conn:
        rows = conn.execute(
            select(Result.device_key, Result.config, Result.created_at, Result.diff)
            .join(latest, latest.c.id == Result.id)
            .order_by(Result.device_key, Result.config)
        ).all()
    out = []
    for r in rows:
        diff = r.diff or {}
        task = diff.get("task_accuracy") or {}
        for o in diff.get("outputs") or []:
            out.append(
                {
                    "device": r.device_key,
                    "config": r.config,
                    "output": o.get("name") or f"output {o.get('index', 0)}",
                    "avg_error": o.get("avg_error"),
                    "std_dev": o.get("std_dev"),
                    "max_error": o.get("max_error"),
                    **{f"task {k}": v for k, v in task.items()},
                    "measured": r.created_at,
                }
            )
    return out


# -- op coverage ---------------------------------------------------------------------------


def op_coverage(engine: Engine, model: str, projects: Projects = None) -> list[dict[str, Any]]:
    """Per device and GPU configuration (newest result of `projects`): ops on the GPU, ops
    left to the CPU, partitions, and each unsupported op with the delegate's reason."""
    latest = _latest_ids(model, projects=projects)
    with engine.begin() as conn:
        rows = conn.execute(
            select(Result.device_key, Result.config, Result.delegation)
            .join(latest, latest.c.id == Result.id)
            .order_by(Result.device_key, Result.config)
        ).all()
    out = []
    for r in rows:
        d = r.delegation or {}
        total, done = d.get("nodes_total"), d.get("nodes_delegated")
        out.append(
            {
                "device": r.device_key,
                "config": r.config,
                "gpu_ops": done,
                "cpu_ops": (total - done) if total is not None and done is not None else None,
                "total_ops": total,
                "partitions": d.get("partitions"),
                "fully_delegated": bool(d.get("fully_delegated")),
                "fallbacks": [
                    {"op": u.get("op", "?"), "reason": u.get("reason", "")}
                    for u in d.get("unsupported") or []
                ]
                + min_work_fallbacks(d),
            }
        )
    return out


def min_work_fallbacks(delegation: dict) -> list[dict[str, str]]:
    """The supported nodes the delegate's placement rule left to the CPU, as a fallback."""
    small = delegation.get("below_min_work") or {}
    if not small.get("nodes"):
        return []
    return [
        {
            "op": f"{small['nodes']} supported op(s)",
            "reason": f"partition below the GPU's minimum work ({small.get('min_work')} "
            "multiply-adds or output elements)",
        }
    ]


# -- compatibility -------------------------------------------------------------------------


def allowlists(
    engine: Engine,
    thresholds: Thresholds,
    model_shas: Sequence[str] | None = None,
    projects: Projects = None,
) -> dict[str, Allowlist]:
    """Allowlists per model (the CLI's rules); of `projects`: their models, on their
    results only."""
    if projects is None:
        return decide_models(engine, thresholds, model_shas)
    from orchestrator import scope

    return scope.decide_models(engine, thresholds, model_shas, projects)


def evidence(
    engine: Engine, projects: Projects = None, models: Sequence[str] | None = None
) -> Read:
    """What allowlists are decided from (allowlists_from), for `models` (sha256; default
    every one): of `projects`, their models on their results only."""
    if projects is None:
        return read_evidence(engine, models)
    return read_evidence(engine, models, models_of(projects), results_of(projects))


def list_models(engine: Engine, projects: Projects = None) -> dict[str, str]:
    """The models allowlists are decided for (sha256 -> name, by name): every stored model,
    of `projects` their models only."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(StoredModel.sha256, StoredModel.name)
            .where(models_of(projects))
            .order_by(StoredModel.name, StoredModel.sha256)
        )
        return {sha: name for sha, name in rows}


def allowlists_from(read: Read, thresholds: Thresholds) -> dict[str, Allowlist]:
    """Allowlists per model from `evidence` (the CLI's rules)."""
    return build_allowlists(read.rows, read.devices, read.models, thresholds)


def evidence_versions(engine: Engine, models: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """Each model's evidence in brief: it changes when a result of the model is stored or a
    device's list columns change (a page may reuse the model's list until then). Per model,
    so that a farm busy measuring some models leaves the others' lists kept; no count over
    every result (0.1 s at 300,000)."""
    import hashlib

    from orchestrator.allowlist.collect import DEVICE_COLUMNS

    with engine.connect() as conn:
        counted = {
            m: (n, newest)
            for m, n, newest in conn.execute(
                select(Result.model_sha256, func.count(), func.max(Result.id))
                .where(Result.model_sha256.in_(list(models)))
                .group_by(Result.model_sha256)
            )
        }
        columns = [cast(c, Text) for c in DEVICE_COLUMNS]
        digest = hashlib.sha256()
        for row in conn.execute(select(*columns).order_by(Device.key)):
            digest.update(repr(tuple(row)).encode())
    devices = digest.hexdigest()
    return {m: (*counted.get(m, (0, None)), devices) for m in models}


def matrix(lists: dict[str, Allowlist]) -> list[dict[str, Any]]:
    """Models × current devices: status, reason code and text, best precision, and the
    results set aside as measured under other configuration records."""
    out = []
    for a in lists.values():
        for e in a.entries:
            for key in e.current:
                d = e.decision
                out.append(
                    {
                        "model": a.model_name,
                        "device": key,
                        "status": d.status,
                        "code": d.code,
                        "reason": d.reason or (f"best: {d.config}" if d.config else ""),
                        "precision": d.precision,
                        "speedup": d.speedup,
                        "set_aside": e.evidence.set_aside,  # other configurations' results
                    }
                )
    return out


# -- history -------------------------------------------------------------------------------


def history_devices(engine: Engine, model: str, projects: Projects = None) -> list[str]:
    """Devices with results (of `projects`) for the model (one version, by sha256)."""
    return _history_devices(engine, Result.model_sha256 == model, projects)


def lineages(engine: Engine, projects: Projects = None) -> list[str]:
    """Model names (lineages: `submit --name`, else the file name) that have results (of
    `projects`)."""
    with engine.begin() as conn:
        return list(
            conn.execute(
                select(Job.model_name)
                .join(Result, Result.job_id == Job.id)
                .where(Job.model_name != "", of_projects(Job.project, projects))
                .distinct()
                .order_by(Job.model_name)
            ).scalars()
        )


def lineage_devices(engine: Engine, name: str, projects: Projects = None) -> list[str]:
    """Devices with results (of `projects`) for any version of the named model."""
    return _history_devices(engine, Job.model_name == name, projects)


def _history_devices(engine: Engine, where: Any, projects: Projects) -> list[str]:
    with engine.begin() as conn:
        return list(
            conn.execute(
                select(Result.device_key)
                .join(Job, Job.id == Result.job_id)
                .where(where, of_projects(Job.project, projects))
                .distinct()
                .order_by(Result.device_key)
            ).scalars()
        )


def history(
    engine: Engine, model: str, device: str, projects: Projects = None
) -> list[dict[str, Any]]:
    """One version's (sha256) results (of `projects`) on one device over time (oldest
    first)."""
    return _history(engine, Result.model_sha256 == model, device, projects)


def lineage_history(
    engine: Engine, name: str, device: str, projects: Projects = None
) -> list[dict[str, Any]]:
    """The named model's results (of `projects`) on one device over time, every version
    (oldest first)."""
    return _history(engine, Job.model_name == name, device, projects)


def _history(engine: Engine, where: Any, device: str, projects: Projects) -> list[dict[str, Any]]:
    """Rows with the figures `flag_regressions` judges (the raw runs among them)."""
    driver = Result.device_facts["driver_version"].as_string()
    with engine.begin() as conn:
        rows = conn.execute(
            select(
                Result.created_at,
                Result.campaign_id,
                Campaign.name,
                Result.config,
                Result.outcome,
                Result.model_sha256,
                Result.max_avg_error,
                Result.config_fingerprint,
                Result.measurement["timing"]["path"].as_string().label("timing"),
                driver.label("driver"),
                *regression.SAMPLE_COLUMNS,
            )
            .join(Campaign, Campaign.id == Result.campaign_id)
            .join(Job, Job.id == Result.job_id)
            .where(
                where,
                Result.device_key == device,
                of_projects(Job.project, projects),
                cell_history.NOT_A_CONFIRMATION,
            )
            .order_by(Result.created_at, Result.id)
        ).mappings()
        return [
            {
                "at": r["created_at"],
                "campaign": r["campaign_id"],
                "campaign_name": r["name"],
                "version": r["model_sha256"][:10],
                "config": r["config"],
                "outcome": r["outcome"],
                "avg_ms": _ms(r["avg_us"]),
                "median_ms": _ms(r["median_us"]),
                "max_avg_error": r["max_avg_error"],
                "driver": r["driver"] or "",
                "config_fingerprint": r["config_fingerprint"] or "",
                "timing": r["timing"],
                "sample": regression.sample_or_none(r),
            }
            for r in rows
        ]


def flag_regressions(
    rows: Sequence[dict[str, Any]], threshold: float = regression.DEFAULT_THRESHOLD
) -> list[dict[str, Any]]:
    """Rows with `regression` set where a run is suspect as the CI gate screens it
    (orchestrator.history.judge): its figure (its fastest run; the average where a tool
    kept no runs) slower than the median of the runs of its configuration before it (the
    same name and `config_fingerprint`: a run under other switches is no baseline) by more
    than `threshold` and by more than K_NOISE times their run-to-run noise. `change` is the
    figure's change against that median, `noise` the noise it was judged with; the first
    run of a configuration is not judged. One lucky fast run never becomes the reference,
    and a busy host's jitter is learned rather than flagged."""
    by_config: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        by_config.setdefault((r["config"], r.get("config_fingerprint") or ""), []).append(i)
    out = [dict(r, change=None, noise=None, regression=False) for r in rows]
    for idx in by_config.values():
        past: list[cell_history.Past] = []
        for i in idx:
            value = cell_history.figure(_sample(rows[i]))
            if value is None:
                continue
            verdict = cell_history.judge(value, past, threshold)
            if verdict.judged and verdict.noise is not None:
                out[i].update(
                    change=verdict.change, noise=verdict.noise.sigma, regression=verdict.suspect
                )
            past.append(
                cell_history.Past(value, rows[i].get("version", ""), rows[i].get("campaign", 0))
            )
    return out


def _sample(row: dict[str, Any]) -> regression.Sample | None:
    if "sample" in row:
        return row["sample"]
    if row["outcome"] != SUCCEEDED or row.get("avg_ms") is None:
        return None
    return regression.Sample(mean=row["avg_ms"])


def summary(engine: Engine) -> dict[str, int]:
    """Counts for the home page."""
    with engine.begin() as conn:
        return {
            "devices": conn.execute(select(func.count()).select_from(Device)).scalar_one(),
            "models": conn.execute(select(func.count()).select_from(StoredModel)).scalar_one(),
            "campaigns": conn.execute(select(func.count()).select_from(Campaign)).scalar_one(),
            "results": conn.execute(select(func.count()).select_from(Result)).scalar_one(),
            "running": conn.execute(
                select(func.count()).select_from(Job).where(Job.state == RUNNING)
            ).scalar_one(),
        }
