"""Campaign results as rows, and those rows as a table, CSV or JSON; derived figures
(speed-up over the CPU) come from farm_core.metrics, how each was measured (configuration
fingerprint, timing path, uncertainty) from orchestrator.provenance, what the CI gate
decided of a job from the verdict kept with its campaign (orchestrator.verdicts)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, func, select

from farm_core import metrics
from farm_core.schema import RUNNING, Campaign, Device, Job, Result, StoredModel

from . import provenance, verdicts
from .scope import Projects, of_projects

#: Columns of the comparison table: (header, row key, format).
TABLE_COLUMNS = (
    ("model", "model", "{}"),
    ("device", "device", "{}"),
    ("config", "config", "{}"),
    ("state", "state", "{}"),
    ("avg ms", "avg_ms", "{:.3f}"),
    ("median ms", "median_ms", "{:.3f}"),
    ("p95 ms", "p95_ms", "{:.3f}"),
    ("init ms", "init_ms", "{:.1f}"),
    ("+process ms", "process_init_ms", "{:.1f}"),
    ("vs cpu", "speedup", "{:.2f}x"),
    ("gpu ops", "delegated", "{}"),
    ("diff", "max_avg_error", "{:.2e}"),
    ("median ± ci95 ms", "median_ci_ms", "{}"),
    ("timing", "timing", "{}"),
    ("config id", "fingerprint", "{}"),
    ("note", "note", "{}"),
)


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def campaign_rows(engine: Engine, campaign_id: int, full: bool = False) -> list[dict[str, Any]]:
    """One row per job of a campaign, with its result's key figures (all of it if `full`)."""
    cols = [
        Job.id,
        Job.state,
        Job.config,
        Job.device_key,
        Job.planned_device,
        Job.attempt,
        Job.failures,
        Job.reason,
        Job.progress,
        Job.model_name,
        StoredModel.name,
        StoredModel.sha256,
        Result.avg_us,
        Result.median_us,
        Result.p95_us,
        Result.init_us,
        # the init split (docs/tools.md): the model's own part, the process's first-job part
        Result.benchmark["init_model_us"].as_float().label("init_model_us"),
        Result.benchmark["init_process_us"].as_float().label("init_process_us"),
        Result.max_avg_error,
        Result.delegated_ops,
        Result.total_ops,
        Result.error,
        Result.id.label("result"),
        Result.config_fingerprint,
        Result.measurement,
        Device.host,
        Device.kind,
    ]
    if full:
        cols += [
            Result.benchmark,
            Result.diff,
            Result.delegation,
            Result.device_facts,
            Result.versions,
        ]
    with engine.begin() as conn:
        verdict = conn.execute(select(Campaign.gate).where(Campaign.id == campaign_id)).scalar()
        rows = (
            conn.execute(
                select(*cols)
                .join(StoredModel, StoredModel.sha256 == Job.model_sha256)
                .outerjoin(Result, (Result.job_id == Job.id) & (Result.attempt == Job.attempt))
                .outerjoin(Device, Device.key == Job.device_key)
                .where(Job.campaign_id == campaign_id)
                .order_by(Job.model_name, StoredModel.name, Job.planned_device, Job.config)
            )
            .mappings()
            .all()
        )
    out = []
    for r in rows:
        decision, details = verdicts.job_decision(verdict, r["id"])
        d = {
            "job": r["id"],
            "model": r["model_name"] or r["name"],  # its lineage (`submit --name`)
            "sha256": r["sha256"],
            "device": r["device_key"],
            "planned_device": r["planned_device"],
            "config": r["config"],
            "state": r["state"],
            "attempt": r["attempt"],
            "failures": r["failures"],
            "avg_ms": _ms(r["avg_us"]),
            "median_ms": _ms(r["median_us"]),
            "p95_ms": _ms(r["p95_us"]),
            # the model's own init; where no split is known (phones), the tool's whole Init
            "init_ms": _ms(r["init_us"] if r["init_model_us"] is None else r["init_model_us"]),
            "process_init_ms": _ms(r["init_process_us"]),
            "max_avg_error": r["max_avg_error"],
            "delegated": (f"{r['delegated_ops']}/{r['total_ops']}" if r["total_ops"] else None),
            "reason": r["error"] or r["reason"] or "",
            # a running job's newest progress line; what the gate decided of it (a suspect)
            "progress": r["progress"] if r["state"] == RUNNING else "",
            "gate": "; ".join([decision, *details]) if decision else "",
            # how it was measured ({} and "" for results from before the record, or none)
            "result": r["result"],
            "config_fingerprint": r["config_fingerprint"] or "",
            "measurement": r["measurement"] or {},
            "fingerprint": provenance.short_fingerprint(r["config_fingerprint"]),
            "timing": provenance.timing_path(r["measurement"]),
            "median_ci_ms": provenance.median_ci_ms(r["measurement"]),
        }
        if full:
            d.update(
                {k: r[k] for k in ("benchmark", "diff", "delegation", "device_facts", "versions")}
            )
        out.append(d)
    measured = [
        {"model": r["sha256"], "device": r["device_key"], "host": r["host"], "kind": r["kind"]}
        | {"config": r["config"], "avg_us": r["avg_us"]}
        for r in rows
    ]
    base = metrics.baselines(measured)
    no_cpu = []  # why a measured row has no speed-up (a phone without a cpu run of its own)
    for d, m in zip(out, measured, strict=True):
        cpu_us = base.get((m["model"], m["device"]))
        d["speedup"] = metrics.speedup(cpu_us, m["avg_us"])
        missing = cpu_us is None and m["avg_us"] is not None
        no_cpu.append(metrics.no_baseline_reason(m["kind"]) if missing else "")
    _add_notes(out, no_cpu)
    return out


def _add_notes(rows: list[dict[str, Any]], no_cpu: Sequence[str]) -> None:
    """What the CI gate decided of a suspect, where a job ran when it moved, why a measured
    row has no speed-up (`no_cpu`), and the first line of why it did not succeed."""
    for r, why in zip(rows, no_cpu, strict=True):
        gate = f"gate: {r['gate'].split('; ')[0]}" if r["gate"] else ""
        moved = r["device"] != r["planned_device"]
        note = f"ran on {r['device']} (planned {r['planned_device']})" if moved else ""
        reason = r["reason"].splitlines()[0] if r["reason"] else ""
        r["note"] = "; ".join(x for x in (gate, note, why, reason) if x)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """An aligned text table of the comparison columns."""
    if not rows:
        return "(no jobs)"
    cells = [[h for h, _, _ in TABLE_COLUMNS]]
    for r in rows:
        cells.append(["-" if r.get(k) is None else fmt.format(r[k]) for _, k, fmt in TABLE_COLUMNS])
    widths = [max(len(row[i]) for row in cells) for i in range(len(TABLE_COLUMNS))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_configs(rows: Sequence[dict[str, Any]]) -> str:
    """Each configuration record of the rows' results once (switches with values and
    sources), with the jobs measured under it; jobs without a result are left out."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for r in rows:
        if r.get("result") is None:
            continue
        m = r.get("measurement") or {}
        key = json.dumps([r.get("config_fingerprint") or "", m.get("config")], sort_keys=True)
        lines, used = groups.setdefault(
            key, (provenance.describe(r.get("config_fingerprint") or "", m), [])
        )
        used.append(f"job {r['job']} ({r['model']} {r['device']} {r['config']})")
    return "\n\n".join(
        "\n".join([*lines, "  jobs: " + ", ".join(used)]) for lines, used in groups.values()
    )


def format_csv(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    keys = [k for k in rows[0] if not isinstance(rows[0][k], dict)]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def format_json(rows: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(rows), indent=2, default=str)


def campaign_counts(
    engine: Engine, campaign_id: int | None = None, projects: Projects = None, limit: int = 50
) -> list[dict[str, Any]]:
    """Per campaign (the newest `limit`, of `projects`: None for all): its project, owner
    and jobs counted by state (newest first)."""
    with engine.begin() as conn:
        q = select(
            Campaign.id,
            Campaign.name,
            Campaign.created_at,
            Campaign.cancelled,
            Campaign.gate,
            Campaign.project,
            Campaign.owner,
        ).where(of_projects(Campaign.project, projects))
        if campaign_id is not None:
            q = q.where(Campaign.id == campaign_id)
        campaigns = conn.execute(q.order_by(Campaign.id.desc()).limit(limit)).all()
        ids = [c.id for c in campaigns]
        counts = conn.execute(
            select(Job.campaign_id, Job.state, func.count())
            .where(Job.campaign_id.in_(ids))
            .group_by(Job.campaign_id, Job.state)
        ).all()
    by: dict[int, dict[str, int]] = {}
    for cid, state, n in counts:
        by.setdefault(cid, {})[state] = n
    return [
        {
            "campaign": c.id,
            "name": c.name,
            "created": c.created_at,
            "cancelled": c.cancelled,
            "gate": c.gate or {},  #: the CI gate's verdict, when `submit --wait` kept one
            "states": by.get(c.id, {}),
            "jobs": sum(by.get(c.id, {}).values()),
            "project": c.project,
            "owner": c.owner,
        }
        for c in campaigns
    ]


def device_rows(engine: Engine) -> list[dict[str, Any]]:
    with engine.begin() as conn:
        rows = conn.execute(select(Device.__table__).order_by(Device.key)).mappings().all()
    return [dict(r) for r in rows]
