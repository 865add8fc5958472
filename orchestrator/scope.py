"""What a set of projects sees: their campaigns, the results of their jobs and the models
those jobs ran. The API and the dashboard filter through these functions.

`projects` is a collection of project names, or None for every project (an admin).
Devices are the lab's, shared by every project.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import Connection, Engine, select, true

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
    from orchestrator.allowlist.collect import resolve_model as resolve

    return resolve(conn, text, models_of(projects))


def decide_models(
    engine: Engine, thresholds: Any, models: Iterable[str] | None, projects: Projects
) -> dict[str, Any]:
    """orchestrator.allowlist.collect.decide_models on the results of `projects` only, for
    their models (`models`: sha256s, default all of theirs)."""
    from orchestrator.allowlist.collect import decide_models as decide

    return decide(engine, thresholds, models, models_of(projects), results_of(projects))


def build_allowlist(
    engine: Engine, model: str, thresholds: Any, projects: Projects, delegate: str = "gpu"
) -> Any:
    """The allowlist (`delegate`'s) of one model of `projects` (sha256, prefix or name), on
    their results."""
    from orchestrator.allowlist.collect import build_allowlist as build

    return build(
        engine, model, thresholds, models_of(projects), results_of(projects), delegate=delegate
    )
