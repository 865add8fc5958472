"""The API's artifact endpoints: a job's debug artifacts listed and downloaded, behind the
token and the job's project like every route (another project's job is the 404 of one
that does not exist)."""

from __future__ import annotations

import urllib.parse

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from farm_core import artifacts

from .errors import ApiError
from .routes import Json, _access, _call, _farm


def _no_job(job: int) -> ApiError:
    return ApiError(404, f"no job {job} (`devicefarm status CAMPAIGN` lists a campaign's jobs)")


async def _check_job(request: Request, job: int) -> None:
    """404 unless the job exists in a project of the caller."""
    project = await run_in_threadpool(artifacts.job_project, _farm(request).engine, job)
    _access(request, write=False).check(project, False, lambda: _no_job(job))


def _listing(engine, job: int) -> list[dict]:
    with engine.begin() as conn:
        return [i.to_dict() for i in artifacts.listing(conn, job)]


def _fetch(engine, job: int, attempt: int, name: str):
    with engine.begin() as conn:
        return artifacts.fetch(conn, job, attempt, name)


async def list_artifacts(request: Request) -> Response:
    """A job's artifacts, each with the path it downloads from."""
    job = request.path_params["job"]
    await _check_job(request, job)
    rows = await _call(_listing, _farm(request).engine, job)
    for row in rows:
        name = urllib.parse.quote(row["name"])
        row["url"] = f"/v1/jobs/{job}/artifacts/{row['attempt']}/{name}"
    return Json({"job": job, "artifacts": rows})


async def download_artifact(request: Request) -> Response:
    """One artifact's bytes, as a file (its bytes as kept: the listing says when cut)."""
    job, attempt, name = (request.path_params[k] for k in ("job", "attempt", "name"))
    await _check_job(request, job)
    found = await _call(_fetch, _farm(request).engine, job, attempt, name)
    if found is None:
        raise ApiError(404, f"job {job} has no artifact {attempt}/{name[:255]}")
    info, data = found
    headers = {
        "Content-Disposition": f'attachment; filename="job{job}-{attempt}-{info.name}"',
        "X-Content-Type-Options": "nosniff",
    }
    return Response(data, media_type=info.media_type, headers=headers)
