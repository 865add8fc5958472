"""The API's endpoints. Each checks the caller's token and role first, then the project of
what it asks for (api.auth.Access: another project's campaign or model is a 404, as one
that does not exist), then runs the orchestrator's own functions (the same the
`devicefarm` commands run) in a worker thread."""

from __future__ import annotations

import json
import logging
import tempfile
import urllib.parse
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from delegate_runtime.errors import DevicefarmError, JobError

from .auth import ANY_PROJECT, Access, authenticate
from .errors import ApiError
from .openapi import OPENAPI
from .uploads import MAX_FIELDS, MAX_MODELS, InputFolder, ModelFolder, Params

log = logging.getLogger(__name__)
T = TypeVar("T")

MULTIPART, RAW, JSON_TYPE = "multipart/form-data", "application/octet-stream", "application/json"
#: allowlist format -> (media type, file extension)
ALLOWLIST_MEDIA = {
    "devicedb-json": ("application/json", "json"),
    "devicedb-bin": ("application/octet-stream", "bin"),
    "csv": ("text/csv; charset=utf-8", "csv"),
    "json": ("application/json", "json"),
}
#: The most pairs a confirmation may ask for (each pair is two jobs on one device).
MAX_CONFIRM_PAIRS = 20
#: The response header carrying the allowlist's one-line summary (percent-encoded UTF-8).
SUMMARY_HEADER = "X-Devicefarm-Summary"


class Json(JSONResponse):
    """JSON as the CLI prints it (datetimes as `str()`), UTF-8 unescaped."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=str, ensure_ascii=False).encode("utf-8")


def _farm(request: Request) -> Any:
    return request.app.state.farm


def _access(request: Request, write: bool) -> Access:
    """The request's authenticated caller (401; 403 when `write` and it may only read)."""
    return Access(request, authenticate(request, _farm(request).tokens, write))


def _missing_campaign(campaign: int) -> Callable[[], ApiError]:
    """The 404 of a campaign that does not exist (or is another project's), in the words
    of the orchestrator's own functions."""
    return lambda: ApiError(404, f"no campaign {campaign} (`devicefarm status` lists them)")


async def _check_campaign(
    access: Access, campaign: int, write: bool, missing: Callable[[], ApiError] | None = None
) -> None:
    """404 unless the campaign exists in a project of the caller; 403 when `write` and the
    caller may only read there."""
    from orchestrator.scope import campaign_project

    project = await run_in_threadpool(campaign_project, _farm(access.request).engine, campaign)
    access.check(project, write, missing or _missing_campaign(campaign))


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _no_body(request: Request) -> None:
    """POSTs that take no body accept none, or JSON (ignored)."""
    ctype = _content_type(request)
    if ctype and ctype != JSON_TYPE:
        raise ApiError(415, f"this endpoint takes no body (or {JSON_TYPE}), not {ctype}")


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn` in a worker thread; the farm's input errors become 400s."""
    try:
        return await run_in_threadpool(fn, *args, **kwargs)
    except DevicefarmError as exc:  # JobError, SubmissionError, ModelError: the input's fault
        raise ApiError(400, str(exc), getattr(exc, "errors", ())) from exc


async def openapi(_request: Request) -> Response:
    return Json(OPENAPI)


async def health(request: Request) -> Response:
    """200 when the database answers (no token needed: load balancers and compose ask)."""
    from sqlalchemy import text

    def ping() -> None:
        with _farm(request).engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    try:
        await run_in_threadpool(ping)
    except Exception as exc:
        log.warning("health: database unreachable: %s", exc)
        raise ApiError(503, "the database does not answer") from exc
    return Json({"ok": True})


# --- submit ---------------------------------------------------------------------------


def _model_cap(farm: Any, params: Params) -> int:
    """The server's model cap, or the caller's smaller one (`max_model_mb`)."""
    cap = farm.model_cap()
    asked = params.number("max_model_mb", None)
    if asked is not None and not 0 < asked * 1024**2 <= cap:
        params.errors.append(f"max_model_mb must be in (0, {cap / 1024**2:g}]")
    return cap if asked is None or asked <= 0 else min(cap, int(asked * 1024**2))


async def _read_models(
    request: Request, folder_path: str
) -> tuple[ModelFolder, Params, InputFolder]:
    """The models, the parameters and the input value files of a submission."""
    from farm_core.user_inputs import MAX_INPUTS

    farm = _farm(request)
    ctype = _content_type(request)
    inputs = InputFolder(Path(folder_path) / "inputs")
    if ctype == MULTIPART:
        async with request.form(
            max_files=MAX_MODELS + MAX_INPUTS, max_fields=MAX_FIELDS + MAX_INPUTS
        ) as form:
            params = Params(request.query_params, form)
            folder = ModelFolder(folder_path, _model_cap(farm, params))
            specs = [v for v in form.getlist("input") if isinstance(v, str)]
            for key, value in form.multi_items():
                if not isinstance(value, UploadFile):
                    continue
                if key == "model":
                    await folder.add_upload(value)
                elif key == "input_file" and len(inputs.values) < len(specs):
                    await inputs.add_upload(specs[len(inputs.values)], value)
                elif key == "input_file":
                    raise ApiError(400, "each 'input_file' part needs an 'input' field before it")
                else:
                    raise ApiError(
                        400,
                        f"unexpected file part {key[:40]!r} (models: 'model', inputs: "
                        "'input_file')",
                    )
            if len(specs) != len(inputs.values):
                raise ApiError(400, "each 'input' field needs its 'input_file' part")
    elif ctype == RAW:
        params = Params(request.query_params)
        folder = ModelFolder(folder_path, _model_cap(farm, params))
        await folder.add_stream(params.text("filename"), request)
    else:
        raise ApiError(415, f"submit takes {MULTIPART} or {RAW}, not {ctype or 'no type'}")
    if not folder.paths:
        raise ApiError(400, "no model: send 'model' file parts, or the model as the raw body")
    return folder, params, inputs


def _submit(farm: Any, paths: list[Path], **kwargs: Any) -> Any:
    from orchestrator.submit import submit

    with farm.send_lock:
        return submit(farm.engine, farm.dispatcher, paths, **kwargs)


async def submit_campaign(request: Request) -> Response:
    from farm_core.configs import DEFAULT_CONFIGS
    from orchestrator.submit import RunSettings

    access = _access(request, write=True)
    with tempfile.TemporaryDirectory(prefix="devicefarm-api-") as tmp:
        folder, params, inputs = await _read_models(request, tmp)
        project = access.submit_project(params.text("project"))
        default = RunSettings()
        settings = RunSettings(
            num_runs=params.integer("runs", default.num_runs),
            diff_runs=params.integer("diff_runs", default.diff_runs),
            timeout_s=params.number("timeout", None),
        )
        kwargs = {
            "selector": params.text("devices", "all"),
            "configs": params.text("configs", ",".join(DEFAULT_CONFIGS)),
            "settings": settings,
            "priority": params.integer("priority", 0),
            "name": params.text("name"),
            "model_name": params.text("model_name"),
            "max_model_bytes": folder.max_bytes,
            "inputs": inputs.values,
            "project": project,
            "owner": access.who.name,
        }
        params.check()
        try:
            sub = await _call(_submit, _farm(request), folder.paths, **kwargs)
        except ApiError as exc:  # name the uploads as sent, not by their folder here

            def unfold(text: str) -> str:
                return _unfold(text, folder.folder, inputs.names)

            raise ApiError(
                exc.status, unfold(exc.message), [unfold(e) for e in exc.errors]
            ) from exc
    log.info(
        "%s submitted campaign %d in project %s (%d jobs)",
        access.who.name,
        sub.campaign_id,
        project,
        sub.jobs,
    )
    body = {
        "campaign": sub.campaign_id,
        "project": project,
        "jobs": sub.jobs,
        "devices": sub.devices,
        "sent": sub.sent,
        "warnings": sub.warnings,
    }
    return Json(body, status_code=201)


def _unfold(text: str, folder: Path, inputs: dict[str, str]) -> str:
    """`<folder>/<i>/name.tflite` -> `name.tflite` in a message; a saved input value file
    -> the name it was sent under."""
    import re

    for path, name in inputs.items():
        text = text.replace(path, name)
    return re.sub(re.escape(str(folder).rstrip("/")) + r"/\d+/", "", text)


# --- status, results, cancel, re-run ---------------------------------------------------


def _no_campaign(campaign: int) -> ApiError:
    return ApiError(404, f"campaign {campaign} has no jobs (or does not exist)")


async def list_campaigns(request: Request) -> Response:
    """The newest campaigns of the caller's projects (an admin's: of every project)."""
    from orchestrator.report import campaign_counts

    access = _access(request, write=False)
    access.log(ANY_PROJECT)
    rows = await _call(campaign_counts, _farm(request).engine, None, access.who.projects)
    return Json({"campaigns": rows})


async def campaign_status(request: Request) -> Response:
    """The campaign's counts by state, and its jobs with their key figures."""
    from orchestrator.report import campaign_counts, campaign_rows

    farm = _farm(request)
    campaign = request.path_params["campaign"]
    await _check_campaign(_access(request, False), campaign, False, lambda: _no_campaign(campaign))
    counts = await _call(campaign_counts, farm.engine, campaign)
    if not counts:
        raise _no_campaign(campaign)
    rows = await _call(campaign_rows, farm.engine, campaign)
    return Json(counts[0] | {"rows": rows})


async def campaign_results(request: Request) -> Response:
    """Every job's figures: JSON (`?format=json`, the default) or CSV (`?format=csv`)."""
    from orchestrator.report import campaign_rows, format_csv

    farm = _farm(request)
    campaign = request.path_params["campaign"]
    await _check_campaign(_access(request, False), campaign, False, lambda: _no_campaign(campaign))
    params = Params(request.query_params)
    fmt = params.text("format", "json")
    full = params.flag("full")
    if fmt not in ("json", "csv"):
        params.errors.append(f"format: json or csv, not {fmt[:20]!r}")
    params.check()
    rows = await _call(campaign_rows, farm.engine, campaign, full=full)
    if not rows:
        raise _no_campaign(campaign)
    if fmt == "csv":
        return Response(format_csv(rows), media_type="text/csv; charset=utf-8")
    return Json({"campaign": campaign, "results": rows})


def _baseline(engine: Any, campaign: int, baseline: str | None, projects: Any) -> str | None:
    """The baseline campaign's id, found among the caller's projects' campaigns only
    (404 for another project's, as for one that does not exist)."""
    from orchestrator.scope import resolve_campaign

    if baseline is None:
        return None
    with engine.begin() as conn:
        try:
            return str(resolve_campaign(conn, baseline, projects, exclude=campaign))
        except JobError as exc:
            raise ApiError(404, str(exc)) from exc


def _gate(
    engine: Any,
    campaign: int,
    baseline: str | None,
    threshold: float,
    confirm: bool,
    ended: str = "",
    keep: bool = False,
    projects: Any = None,
) -> dict:
    """The gate's verdict as the API serves it; `keep`: also keep it with the campaign
    (orchestrator.verdicts), as `submit --wait` does; `baseline` among `projects`."""
    from orchestrator import gate, junit, verdicts

    baseline = _baseline(engine, campaign, baseline, projects)
    try:
        report = gate.evaluate(engine, campaign, baseline, threshold=threshold, confirm=confirm)
    except JobError as exc:  # the campaign or the baseline campaign is unknown
        raise ApiError(404, str(exc)) from exc
    return {
        "campaign": campaign,
        "exit_code": report.exit_code,
        "running": gate.still_running(engine, campaign),
        "kept": verdicts.record(engine, report) if keep else False,
        "lines": gate.summary_lines(report),
        "junit": junit.to_xml(report, ended).decode("utf-8"),
    }


#: The most characters of `ended` (why a client's wait ended early, said in the JUnit).
MAX_ENDED_CHARS = 200


def _gate_params(request: Request) -> tuple[Params, str | None, float]:
    """The gate's query: its baseline campaign and its threshold (a fraction)."""
    from orchestrator.regression import DEFAULT_THRESHOLD

    params = Params(request.query_params)
    baseline = params.text("baseline") or None
    percent = params.number("regression_threshold", DEFAULT_THRESHOLD * 100)
    if percent is None or percent < 0:
        params.errors.append("regression_threshold must be 0 or more (percent)")
    return params, baseline, (percent or 0.0) / 100


async def campaign_gate(request: Request) -> Response:
    """The CI gate's verdict on a campaign: exit code, summary lines and JUnit XML (its
    unfinished jobs as errors, saying `?ended=` why the wait ended)."""
    farm = _farm(request)
    access = _access(request, write=False)
    params, baseline, threshold = _gate_params(request)
    confirm = not params.flag("no_confirm")
    ended = params.text("ended")
    if len(ended) > MAX_ENDED_CHARS:
        params.errors.append(f"ended: at most {MAX_ENDED_CHARS} characters")
    params.check()
    campaign = request.path_params["campaign"]
    await _check_campaign(access, campaign, write=False)
    body = await _call(
        _gate, farm.engine, campaign, baseline, threshold, confirm, ended,
        projects=access.who.projects,
    )  # fmt: skip
    return Json(body)


async def keep_gate(request: Request) -> Response:
    """Judge the campaign as GET .../gate does and keep the verdict with it (`kept`: false
    while a job has not ended), as `submit --wait` does; `status` and `results` show it."""
    farm = _farm(request)
    access = _access(request, write=True)
    _no_body(request)
    params, baseline, threshold = _gate_params(request)
    confirm = not params.flag("no_confirm")
    params.check()
    campaign = request.path_params["campaign"]
    await _check_campaign(access, campaign, write=True)
    body = await _call(
        _gate, farm.engine, campaign, baseline, threshold, confirm, keep=True,
        projects=access.who.projects,
    )  # fmt: skip
    if body["kept"]:
        log.info("%s kept the gate's verdict on campaign %d: exit %d", access.who.name, campaign,
                 body["exit_code"])  # fmt: skip
    return Json(body)


def _confirm(
    farm: Any, campaign: int, baseline: str | None, threshold: float, pairs: int, projects: Any
) -> dict:
    from orchestrator import gate

    baseline = _baseline(farm.engine, campaign, baseline, projects)
    with farm.send_lock:  # one caller at a time sees a suspect without its confirmation
        try:
            report = gate.evaluate(farm.engine, campaign, baseline, threshold=threshold)
        except JobError as exc:
            raise ApiError(404, str(exc)) from exc
        pending = [c for c in report.cells if c.pending]
        started = gate.confirm_pending(farm.engine, farm.dispatcher, report, pairs)
    return {
        "campaign": campaign,
        "suspects": [f"{c.model} {c.device} {c.config}: {c.verdict.describe()}" for c in pending],
        "confirmations": started,
    }


async def confirm_campaign(request: Request) -> Response:
    """Start a confirmation (paired runs) for each of the campaign's suspects that has none;
    the confirmation campaigns to wait for."""
    from orchestrator.confirm import DEFAULT_PAIRS

    farm = _farm(request)
    access = _access(request, write=True)
    _no_body(request)
    params, baseline, threshold = _gate_params(request)
    pairs = params.integer("pairs", DEFAULT_PAIRS)
    if not 1 <= pairs <= MAX_CONFIRM_PAIRS:
        params.errors.append(f"pairs must be 1 to {MAX_CONFIRM_PAIRS}")
    params.check()
    campaign = request.path_params["campaign"]
    await _check_campaign(access, campaign, write=True)
    projects = access.who.projects
    body = await _call(_confirm, farm, campaign, baseline, threshold, pairs, projects)
    if body["confirmations"]:
        log.info("%s confirms campaign %d: %s", access.who.name, campaign, body["confirmations"])
    return Json(body)


def _cancel(engine: Any, campaign: int) -> int:
    from sqlalchemy import select

    from farm_core.jobs import cancel
    from farm_core.schema import Campaign

    with engine.begin() as conn:
        if conn.execute(select(Campaign.id).where(Campaign.id == campaign)).first() is None:
            raise ApiError(404, f"no campaign {campaign} (`devicefarm status` lists them)")
        return cancel(conn, campaign)


async def cancel_campaign(request: Request) -> Response:
    farm = _farm(request)
    access = _access(request, write=True)
    _no_body(request)
    campaign = request.path_params["campaign"]
    await _check_campaign(access, campaign, write=True)
    n = await _call(_cancel, farm.engine, campaign)
    log.info("%s cancelled campaign %d (%d jobs)", access.who.name, campaign, n)
    return Json({"campaign": campaign, "cancelled": n})


def _rerun(farm: Any, campaign: int) -> Any:
    from orchestrator.rerun import rerun

    with farm.send_lock:
        return rerun(farm.engine, farm.dispatcher, campaign)


async def rerun_campaign(request: Request) -> Response:
    """Re-queue the campaign's failed, timed-out and cancelled jobs as new attempts."""
    farm = _farm(request)
    access = _access(request, write=True)
    _no_body(request)
    campaign = request.path_params["campaign"]
    await _check_campaign(access, campaign, write=True)
    try:
        out = await run_in_threadpool(_rerun, farm, campaign)
    except JobError as exc:  # the only one rerun raises: no such campaign
        raise ApiError(404, str(exc)) from exc
    log.info("%s re-ran %d job(s) of campaign %d", access.who.name, len(out.cells), campaign)
    keys = ("job", "model", "device", "config", "state")
    return Json(
        {
            "campaign": campaign,
            "cells": [dict(zip(keys, cell, strict=True)) for cell in out.cells],
            "sent": out.sent,
            "broker_error": out.broker_error,
        }
    )


# --- devices and allowlists --------------------------------------------------------------


def _device_rows(engine: Any) -> list[dict[str, Any]]:
    from farm_core.schema import utcnow
    from farm_core.settings import Timing
    from orchestrator.report import device_rows

    cutoff = utcnow() - timedelta(seconds=Timing.from_env().offline_after_s)
    rows = device_rows(engine)
    for r in rows:
        r["alive"] = "online" if r["last_seen"] >= cutoff else "offline"
    return rows


async def devices(request: Request) -> Response:
    """Registered devices, their facts, liveness (`alive`) and health."""
    farm = _farm(request)
    _access(request, write=False).log(ANY_PROJECT)  # the lab's devices: every project's
    return Json({"devices": await _call(_device_rows, farm.engine)})


def _allowlist(
    engine: Any, model: str, fmt: str, thresholds: Any, projects: Any, delegate: str = "gpu"
) -> tuple[bytes, str, str]:
    """A model of `projects`, its allowlist (`delegate`'s) from their results only (404
    for a model no job of theirs ran)."""
    from orchestrator.allowlist.export import render
    from orchestrator.allowlist.rules import summary
    from orchestrator.scope import build_allowlist

    try:
        allowlist = build_allowlist(engine, model, thresholds, projects, delegate)
    except JobError as exc:
        if str(exc).startswith("no model"):
            raise ApiError(404, str(exc)) from exc
        raise
    counts = summary({str(i): e.decision for i, e in enumerate(allowlist.entries)})
    which = "" if delegate == "gpu" else f" {delegate} list"
    line = f"{allowlist.model_name} ({allowlist.model_sha256[:12]}){which}: " + ", ".join(
        f"{n} {s}" for s, n in counts.items()
    )
    return render(allowlist, fmt), allowlist.model_sha256, line


async def allowlist(request: Request) -> Response:
    """A model's allowlist as a file, as `devicefarm allowlist --format F --delegate D`
    writes it (D: gpu by default)."""
    from orchestrator.allowlist.export import BINARY_GPU_ONLY
    from orchestrator.allowlist.rules import LIST_DELEGATES, Thresholds

    farm = _farm(request)
    access = _access(request, write=False)
    params = Params(request.query_params)
    model, fmt = params.text("model"), params.text("format", "devicedb-json")
    if not model:
        params.errors.append("model: give the model's sha256, a prefix of it, or its name")
    if fmt not in ALLOWLIST_MEDIA:
        params.errors.append(f"format: one of {', '.join(ALLOWLIST_MEDIA)}, not {fmt[:20]!r}")
    delegate = params.text("delegate", "gpu")
    if delegate not in LIST_DELEGATES:
        choices = ", ".join(LIST_DELEGATES)
        params.errors.append(f"delegate: one of {choices}, not {delegate[:20]!r}")
    elif delegate != "gpu" and fmt == "devicedb-bin":
        params.errors.append(f"format: a {delegate} list: {BINARY_GPU_ONLY}")
    thresholds = Thresholds(
        min_speedup=params.number("min_speedup", 1.2),
        max_error=params.number("max_error", None),
        require_full_delegation=params.flag("require_full_delegation"),
        min_runs=params.integer("min_runs", 1),
    )
    if thresholds.min_speedup is None or thresholds.min_speedup < 0:
        params.errors.append("min_speedup must be 0 or more")
    if thresholds.max_error is not None and thresholds.max_error < 0:
        params.errors.append("max_error must be 0 or more")
    if thresholds.min_runs < 1:
        params.errors.append("min_runs must be 1 or more")
    params.check()
    projects = access.who.projects
    access.log(ANY_PROJECT if projects is None else ",".join(projects))
    data, sha, line = await _call(
        _allowlist, farm.engine, model, fmt, thresholds, projects, delegate
    )
    media, ext = ALLOWLIST_MEDIA[fmt]
    name = f"allowlist-{sha[:12]}" if delegate == "gpu" else f"allowlist-{delegate}-{sha[:12]}"
    headers = {
        "Content-Disposition": f'attachment; filename="{name}.{ext}"',
        SUMMARY_HEADER: urllib.parse.quote(line),
    }
    return Response(data, media_type=media, headers=headers)
