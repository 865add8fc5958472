"""The farm commands over a farm's HTTP API (`--api URL`, or `$DEVICEFARM_API`) instead of
its database and broker: submit (with --wait), status, results, cancel, rerun, devices and
allowlist print what the local commands print and exit as they do. The token comes from
`$DEVICEFARM_API_TOKEN`, never from the command line (where `ps` shows it).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from delegate_runtime.errors import DevicefarmError, JobError

ENV_API = "DEVICEFARM_API"
ENV_API_TOKEN = "DEVICEFARM_API_TOKEN"
#: The commands that have an --api form.
COMMANDS = frozenset({"submit", "status", "results", "cancel", "rerun", "devices", "allowlist"})
#: How long one HTTP call may take, s (an upload of the largest model included).
REQUEST_TIMEOUT_S = 300.0
#: How often `submit --wait` asks for the campaign's state, s.
POLL_S = 1.0
SUMMARY_HEADER = "X-Devicefarm-Summary"  #: as api/routes.py sends it


class RemoteError(DevicefarmError):
    """The API could not be reached, or refused the call (auth, size, type)."""


def add_api_option(command: str, p: argparse.ArgumentParser) -> None:
    if command in COMMANDS:
        p.add_argument(
            "--api",
            default=None,
            metavar="URL",
            help=f"talk to the farm's HTTP API at URL (default: ${ENV_API}, unless --db is "
            f"given) instead of its database; the token comes from ${ENV_API_TOKEN}",
        )


def api_url(args: argparse.Namespace) -> str | None:
    """The API to talk to: --api, else $DEVICEFARM_API unless a --db/--broker was given."""
    if getattr(args, "api", None):
        if getattr(args, "db", None) or getattr(args, "broker", None):
            raise JobError("give --api or --db/--broker, not both")
        return args.api
    if args.command not in COMMANDS or getattr(args, "db", None) or getattr(args, "broker", None):
        return None
    return os.environ.get(ENV_API) or None


def route(args: argparse.Namespace) -> str:
    """The module that runs the command: this one when it goes to an API."""
    return __name__ if api_url(args) else args._module


class Client:
    """JSON over HTTP(S) with a bearer token; API errors become DevicefarmErrors."""

    def __init__(self, base: str, token: str | None):
        scheme = urllib.parse.urlsplit(base).scheme
        if scheme not in ("http", "https"):
            raise JobError(f"--api {base!r}: expected http://HOST:PORT or https://...")
        self.base, self.token = base.rstrip("/"), token

    def call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> tuple[bytes, Any]:
        """The response's body and headers; raises for any status but 2xx."""
        url = self.base + path
        if query:
            pairs = {k: _param(v) for k, v in query.items() if v is not None and v is not False}
            url += "?" + urllib.parse.urlencode(pairs)
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return response.read(), response.headers
        except urllib.error.HTTPError as exc:
            raise _error(exc.code, exc.read(), path) from None
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", exc)
            raise RemoteError(f"cannot reach the API at {self.base}: {why}") from None

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        data, _ = self.call(method, path, **kwargs)
        return json.loads(data)


def _param(value: Any) -> str:
    return "true" if value is True else str(value)


def _error(status: int, data: bytes, path: str) -> DevicefarmError:
    """The DevicefarmError a local command raises for the same problem, where there is one."""
    try:
        error = json.loads(data)["error"]
        message, errors = str(error["message"]), list(error.get("errors") or [])
    except (ValueError, KeyError, TypeError):
        message, errors = data[:200].decode("utf-8", "replace").strip(), []
    if status == 400 and errors and path == "/v1/campaigns":
        from orchestrator.submit import SubmissionError

        return SubmissionError(errors)
    if status in (400, 404):
        return JobError(message)
    return RemoteError(f"HTTP {status}: {message}")


def client(args: argparse.Namespace) -> Client:
    return Client(str(api_url(args)), os.environ.get(ENV_API_TOKEN) or None)


def run(args: argparse.Namespace) -> int:
    commands = {
        "submit": submit,
        "status": status,
        "results": results,
        "cancel": cancel,
        "rerun": rerun,
        "devices": devices,
        "allowlist": allowlist,
    }
    return commands[args.command](args, client(args))


# --- submit ------------------------------------------------------------------------------


def _multipart(
    fields: dict[str, Any],
    files: list[tuple[str, bytes]],
    inputs: list[tuple[str, str, bytes]],
) -> tuple[bytes, str]:
    """A multipart/form-data body: the fields, each model as a `model` part, then each
    input value file as an `input` field (`LAYER:SHAPE`, empty for an .npz) and its
    `input_file` part (api/uploads.py's InputFolder)."""
    boundary = uuid.uuid4().hex
    out = io.BytesIO()

    def field(key: str, value: str) -> None:
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'.encode())
        out.write(value.encode("utf-8") + b"\r\n")

    def part(key: str, name: str, data: bytes) -> None:
        out.write(  # names with a quote or line break were refused (_read_files)
            f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"; '
            f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
        )
        out.write(data + b"\r\n")

    for key, value in fields.items():
        if value is not None and value != "":
            field(key, _param(value))
    for name, data in files:
        part("model", name, data)
    for spec, name, data in inputs:
        field("input", spec)
        part("input_file", name, data)
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def _plain_name(path: Path, what: str, errors: list[str]) -> bool:
    if any(ch in path.name for ch in '\r\n"'):
        errors.append(f"{what} {path}: its file name holds a quote or a line break")
        return False
    return True


def _read_files(
    args: argparse.Namespace,
) -> tuple[list[tuple[str, bytes]], list[tuple[str, str, bytes]]]:
    """Each model file and each `--input` value file, checked here as the local submit
    checks them (a regular file under its cap, read no further), before any byte is sent:
    the models as (name, bytes), the inputs as (`LAYER:SHAPE` or "" for an .npz, name,
    bytes)."""
    from farm_core import user_inputs
    from orchestrator.submit import (
        DEFAULT_MAX_MODEL_MB,
        SubmissionError,
        max_model_bytes,
        read_model_file,
    )

    cap_mb = args.max_model_mb
    errors = []
    if cap_mb is not None and not 0 < cap_mb <= DEFAULT_MAX_MODEL_MB:
        errors.append(f"--max-model-mb must be in (0, {DEFAULT_MAX_MODEL_MB}]")
        raise SubmissionError(errors)
    cap = max_model_bytes() if cap_mb is None else int(cap_mb * 1024**2)
    files = []
    for p in args.models:
        path = Path(p)
        if not _plain_name(path, "model", errors):
            continue
        try:
            files.append((path.name, read_model_file(path, cap)))
        except JobError as exc:
            errors.append(f"model {p}: {exc}")
    inputs = []
    for value in args.input:
        split = user_inputs.split_value(value)
        if split is None:
            errors.append(
                f"--input {value!r}: give LAYER:SHAPE:FILE (shape 1,224,224,3) or an .npz"
            )
            continue
        layer, shape, path = split
        data = user_inputs.read_file(path, errors)
        if data is not None and _plain_name(Path(path), "input file", errors):
            inputs.append((f"{layer}:{shape}" if layer else "", Path(path).name, data))
    if errors:
        raise SubmissionError(errors)
    return files, inputs


def submit(args: argparse.Namespace, api: Client) -> int:
    gate_only = {"--baseline": args.baseline, "--junit": args.junit}
    gate_only["--wait-timeout"] = args.wait_timeout
    gate_only["--confirm-pairs"] = args.confirm_pairs
    if not args.wait and any(v is not None for v in gate_only.values()):
        given = [k for k, v in gate_only.items() if v is not None]
        raise JobError(f"{', '.join(given)} need(s) --wait")
    fields = {
        "devices": args.devices,
        "configs": args.configs,
        "runs": args.runs,
        "diff_runs": args.diff_runs,
        "priority": args.priority,
        "timeout": args.timeout,
        "name": args.name,
        "model_name": args.name,
        "max_model_mb": args.max_model_mb,
        "project": getattr(args, "project", None),  # None: the API picks the user's only one
    }
    body, content_type = _multipart(fields, *_read_files(args))
    sub = api.json("POST", "/v1/campaigns", body=body, content_type=content_type)
    for w in sub["warnings"]:
        print(f"warning: {w}")
    print(
        f"campaign {sub['campaign']}: {sub['jobs']} jobs on {len(sub['devices'])} device(s), "
        f"{sub['sent']} sent",
        flush=True,
    )
    if not args.wait:
        return 0
    return wait_and_judge(args, api, sub["campaign"])


def wait_and_judge(args: argparse.Namespace, api: Client, campaign: int) -> int:
    """As the local `--wait` (common.wait_and_gate): the jobs as they run and end, then the
    server's verdict, kept with the campaign; the JUnit file on every way out (a passed
    --wait-timeout, an interrupt: the jobs not ended as errors)."""
    from .common import sigterm_interrupts

    try:
        with sigterm_interrupts():
            try:
                wait(api, campaign, args.wait_timeout)
            except TimeoutError as exc:
                print(f"{exc}; its jobs go on (`devicefarm status {campaign}`)", flush=True)
                return _gave_up(args, api, campaign)
            return judge(args, api, campaign)
    except KeyboardInterrupt:
        _junit_as_it_stands(args, api, campaign, "interrupted")
        raise


def wait(api: Client, campaign: int, timeout_s: float | None) -> None:
    """Print each job as it ends, a running job's progress and a job waiting for a device,
    as the local wait does (devicefarm/wait_lines.py); return when all have ended
    (TimeoutError after `timeout_s`)."""
    from ..wait_lines import CampaignLines, JobView

    start = time.monotonic()
    lines = CampaignLines()
    while True:
        rows = api.json("GET", f"/v1/campaigns/{campaign}")["rows"]
        jobs = [
            JobView(r["job"], r["sha256"], r["model"], r["device"], r["config"], r["state"],
                    r.get("reason") or "", r.get("progress") or "", r.get("avg_ms"))
            for r in rows
        ]  # fmt: skip
        now = time.monotonic()
        for line in lines.update(jobs, now - start):
            print(line, flush=True)
        if lines.done(jobs):
            return
        if timeout_s is not None and now - start > timeout_s:
            raise TimeoutError(f"campaign {campaign} did not finish in {timeout_s:g} s")
        time.sleep(POLL_S)


def _gate_query(args: argparse.Namespace) -> dict[str, Any]:
    from .common import confirm_pairs

    return {
        "baseline": args.baseline,
        "regression_threshold": args.regression_threshold,
        "no_confirm": not confirm_pairs(args),
    }


def judge(args: argparse.Namespace, api: Client, campaign: int) -> int:
    """The server's gate verdict, its suspects confirmed first (unless --confirm-pairs 0):
    kept with the campaign, its lines printed, its JUnit XML written; its exit code."""
    from .common import confirm_pairs

    pairs = confirm_pairs(args)
    query = {"baseline": args.baseline, "regression_threshold": args.regression_threshold}
    if pairs:
        started = api.json(
            "POST", f"/v1/campaigns/{campaign}/confirm", query=query | {"pairs": pairs}
        )
        for line in started["suspects"]:
            print(f"suspect: {line}", flush=True)
        for cid in started["confirmations"]:
            print(f"confirmation campaign {cid}: baseline and candidate alternating", flush=True)
            try:
                wait(api, cid, args.wait_timeout)
            except TimeoutError as exc:
                print(f"{exc}; its jobs go on (`devicefarm status {cid}`)", flush=True)
                return _gave_up(args, api, campaign)
    verdict = api.json("POST", f"/v1/campaigns/{campaign}/gate", query=_gate_query(args))
    print("\n".join(verdict["lines"]), flush=True)
    _write_junit(args, verdict["junit"])
    return int(verdict["exit_code"])


def _write_junit(args: argparse.Namespace, xml: str) -> None:
    if args.junit:
        out = Path(args.junit)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(xml, encoding="utf-8")
        os.replace(tmp, out)
        print(f"JUnit report: {out}", flush=True)


def _gave_up(args: argparse.Namespace, api: Client, campaign: int) -> int:
    """A wait passed --wait-timeout: the JUnit file as the campaign stands; exit 1."""
    _junit_as_it_stands(args, api, campaign, f"--wait-timeout {args.wait_timeout:g} s passed")
    return 1


def _junit_as_it_stands(args: argparse.Namespace, api: Client, campaign: int, ended: str) -> None:
    """The JUnit file of a wait that ended early, from the server's verdict as the campaign
    stands (`?ended=` says why in each unfinished job's error); a failure is said, never
    raised over the wait's own outcome."""
    if not args.junit:
        return
    query = _gate_query(args) | {"ended": ended}
    try:
        _write_junit(args, api.json("GET", f"/v1/campaigns/{campaign}/gate", query=query)["junit"])
    except (DevicefarmError, OSError) as exc:
        print(f"JUnit report not written: {type(exc).__name__}: {exc}", flush=True)


# --- status, results, cancel, rerun ------------------------------------------------------


def _failed(rows: list[dict[str, Any]]) -> int:
    from .common import failed_jobs

    return 1 if failed_jobs(rows) else 0


def status(args: argparse.Namespace, api: Client) -> int:
    from orchestrator.report import format_table

    from .status import overview_line

    if args.campaign is not None:
        rows = api.json("GET", f"/v1/campaigns/{args.campaign}")["rows"]
        if not rows:
            raise JobError(f"campaign {args.campaign} has no jobs (or does not exist)")
        print(format_table(rows))
        return _failed(rows)
    for c in api.json("GET", "/v1/campaigns")["campaigns"]:
        print(overview_line(c, datetime.fromisoformat(c["created"])))
    return 0


def results(args: argparse.Namespace, api: Client) -> int:
    from .results import show

    path = f"/v1/campaigns/{args.campaign}/results"
    if args.format == "csv":
        data, _ = api.call("GET", path, query={"format": "csv", "full": args.full})
        text = data.decode("utf-8")
        print(text)
        return _failed(list(csv.DictReader(io.StringIO(text))))
    rows = api.json("GET", path, query={"full": args.full})["results"]
    show(rows, args)
    return _failed(rows)


def cancel(args: argparse.Namespace, api: Client) -> int:
    out = api.json("POST", f"/v1/campaigns/{args.campaign}/cancel")
    print(f"campaign {args.campaign}: {out['cancelled']} job(s) cancelled")
    return 0


def rerun(args: argparse.Namespace, api: Client) -> int:
    done = api.json("POST", f"/v1/campaigns/{args.campaign}/rerun")
    cells = done["cells"]
    if not cells:
        print(
            f"campaign {args.campaign}: nothing to re-run (no failed, timed-out or cancelled job)"
        )
        return 0
    for c in cells:
        print(
            f"re-queued job {c['job']}: {c['model']} {c['device']} {c['config']} (was {c['state']})"
        )
    waiting = len(cells) - done["sent"]
    print(
        f"campaign {args.campaign}: {len(cells)} job(s) re-queued, {done['sent']} sent"
        + (f", {waiting} wait for a device or the reconciler" if waiting else "")
    )
    if done["broker_error"]:
        print(f"warning: broker unreachable ({done['broker_error']}); the reconciler sends them")
    return 0


# --- devices and allowlists --------------------------------------------------------------


def devices(args: argparse.Namespace, api: Client) -> int:
    from .devices import _reason, table

    rows = api.json("GET", "/v1/devices")["devices"]
    if not rows:
        print("no devices registered (start `devicefarm worker`)")
        return 0
    for r in rows:  # as devices.run does, `alive` judged by the server's clock
        r["reason"] = _reason(r["health_reason"])
        r["seen"] = f"{datetime.fromisoformat(r['last_seen']):%H:%M:%S}"
        r["tags"] = ",".join(r["tags"] or [])
    print(table(rows))
    return 0


def allowlist(args: argparse.Namespace, api: Client) -> int:
    """Export through the API; `evaluate` and `merge` read local files and run here."""
    from .allowlist import model_ref
    from .allowlist import run as run_local

    if args.action:
        return run_local(args)
    missing = [f"--{n}" for n in ("model", "out") if not getattr(args, n)]
    if missing:
        raise JobError(f"exporting a list needs {' and '.join(missing)} (or give an ACTION)")
    if args.out == "-" and args.format == "devicedb-bin":
        raise JobError("devicedb-bin is binary: give --out FILE")
    ref = model_ref(args.model)
    query = {
        "model": ref,
        "format": args.format,
        "min_speedup": args.min_speedup,
        "max_error": args.max_error,
        "require_full_delegation": args.require_full_delegation,
        "min_runs": args.min_runs,
    }
    if args.delegate != "gpu":  # the server refuses devicedb-bin for it, as run_local does
        query["delegate"] = args.delegate
    try:
        data, headers = api.call("GET", "/v1/allowlist", query=query)
    except JobError as exc:
        if ref == args.model or not str(exc).startswith("no model"):
            raise
        raise JobError(
            f"model file {args.model} (sha256 {ref[:12]}) was never run on the farm"
        ) from exc
    if args.out == "-":
        sys.stdout.write(data.decode())
    else:
        Path(args.out).write_bytes(data)
    line = urllib.parse.unquote(headers.get(SUMMARY_HEADER, ""))
    print(
        line + ("" if args.out == "-" else f"; wrote {args.format} to {args.out}"),
        file=sys.stderr,
    )
    return 0
