"""What a set of projects sees: their campaigns, the results of their jobs and the models
those jobs ran. The API and the dashboard filter through these functions.

`projects` is a collection of project names, or None for every project (an admin).
Devices are the lab's, shared by every project.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import Connection, Engine, func, or_, select, true

from delegate_runtime.errors import JobError
from farm_core.schema import Campaign, Job, Result, StoredModel

Projects = Collection[str] | None


def campaign_project(engine: Engine, campaign_id: int) -> str | None:
    """The project of a campaign (None: no such campaign)."""
    with engine.begin() as conn:
        return conn.execute(select(Campaign.project).where(Campaign.id == campaign_id)).scalar()


def of_projects(column: Any, projects: Projects) -> Any:
    """A condition: `column` (a project column) is one of `projects` (always, for None)."""
    return true() if projects is None else column.in_(list(projects))


def results_of(projects: Projects) -> Any:
    """A condition on Result: it belongs to a job of `projects`."""
    if projects is None:
        return true()
    return Result.job_id.in_(select(Job.id).where(of_projects(Job.project, projects)))


def models_of(projects: Projects) -> Any:
    """A condition on StoredModel: a job of `projects` ran it."""
    if projects is None:
        return true()
    return StoredModel.sha256.in_(
        select(Job.model_sha256).where(of_projects(Job.project, projects))
    )


def campaign_counts(engine: Engine, projects: Projects, limit: int = 50) -> list[dict[str, Any]]:
    """The newest `limit` campaigns of `projects`, each with its project, owner and jobs by
    state (as orchestrator.report.campaign_counts, which lists every project's)."""
    with engine.begin() as conn:
        campaigns = conn.execute(
            select(
                Campaign.id,
                Campaign.name,
                Campaign.created_at,
                Campaign.cancelled,
                Campaign.gate,
                Campaign.project,
                Campaign.owner,
            )
            .where(of_projects(Campaign.project, projects))
            .order_by(Campaign.id.desc())
            .limit(limit)
        ).all()
        counts = conn.execute(
            select(Job.campaign_id, Job.state, func.count())
            .where(Job.campaign_id.in_([c.id for c in campaigns]))
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
            "gate": c.gate or {},
            "states": by.get(c.id, {}),
            "jobs": sum(by.get(c.id, {}).values()),
            "project": c.project,
            "owner": c.owner,
        }
        for c in campaigns
    ]


def resolve_campaign(
    conn: Connection, ref: str | int, projects: Projects, exclude: int | None = None
) -> int:
    """orchestrator.gate.resolve_campaign among the campaigns of `projects`: by id, or the
    newest of that name other than `exclude`; JobError (the same words for another
    project's) when none."""
    text = str(ref).strip()
    q = select(Campaign.id).where(of_projects(Campaign.project, projects))
    if text.isdigit():
        found = conn.execute(q.where(Campaign.id == int(text))).scalar()
    else:
        q = q.where(Campaign.name == text)
        if exclude is not None:
            q = q.where(Campaign.id != exclude)
        found = conn.execute(q.order_by(Campaign.id.desc()).limit(1)).scalar()
    if found is None:
        raise JobError(f"no campaign {text!r} (`devicefarm status` lists them)")
    return int(found)


def resolve_model(conn: Connection, text: str, projects: Projects) -> tuple[str, str]:
    """orchestrator.allowlist.collect.resolve_model among the models of `projects` (a
    name or prefix that another project's model shares is neither ambiguous nor found)."""
    from orchestrator.allowlist.collect import MIN_PREFIX

    text = text.strip()
    hex_prefix = len(text) >= MIN_PREFIX and all(c in "0123456789abcdef" for c in text.lower())
    rows = conn.execute(
        select(StoredModel.sha256, StoredModel.name).where(
            or_(
                StoredModel.sha256.startswith(text.lower()) if hex_prefix else False,
                StoredModel.name == text,
            ),
            models_of(projects),
        )
    ).all()
    if not rows:
        raise JobError(
            f"no model {text!r} in the database (give its .tflite file, its sha256, a "
            f"sha256 prefix of {MIN_PREFIX}+ characters or its file name)"
        )
    if len(rows) > 1:
        listed = ", ".join(f"{r.name} ({r.sha256[:12]})" for r in rows)
        raise JobError(f"model {text!r} is ambiguous: {listed}; give more of its sha256")
    return rows[0].sha256, rows[0].name


def decide_models(
    engine: Engine, thresholds: Any, models: Iterable[str] | None, projects: Projects
) -> dict[str, Any]:
    """orchestrator.allowlist.collect.decide_models on the results of `projects` only, for
    their models (`models`: sha256s, default all of theirs)."""
    from orchestrator.allowlist.collect import build_allowlists, evidence_query, load_devices

    with engine.begin() as conn:
        names = {
            r.sha256: r.name
            for r in conn.execute(
                select(StoredModel.sha256, StoredModel.name).where(models_of(projects))
            )
        }
        wanted = list(names) if models is None else [m for m in models if m in names]
        query = evidence_query(wanted).where(results_of(projects))
        rows = [dict(r) for r in conn.execute(query).mappings()]
        devices = load_devices(conn)
    return build_allowlists(rows, devices, {m: names[m] for m in wanted}, thresholds)


def build_allowlist(engine: Engine, model: str, thresholds: Any, projects: Projects) -> Any:
    """The allowlist of one model of `projects` (sha256, prefix or name), on their results."""
    with engine.begin() as conn:
        sha, _ = resolve_model(conn, model, projects)
    return decide_models(engine, thresholds, [sha], projects)[sha]
