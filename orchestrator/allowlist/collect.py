"""Evidence from the farm's database, and the allowlist it decides.

Results are grouped by the facts they ran with (`Result.device_facts`), so a driver update
starts a new entry: the list is decided per (device model, driver), as measured. Within
an entry, each configuration's figures (and the host's CPU reference) come from its
newest configuration record only (`config_records`); the others are set aside and
counted. One aggregate query reads every figure the rules need; no result row crosses
into Python.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Integer,
    and_,
    case,
    cast,
    distinct,
    func,
    not_,
    or_,
    select,
    true,
)

from delegate_runtime.errors import JobError
from farm_core import metrics
from farm_core.schema import CANCELLED, FAILED, SUCCEEDED, TIMED_OUT, Device, Result, StoredModel

from .causes import device_caused
from .config_records import MEASURED_UNDER, NEWEST_OK, keep_newest
from .facts import list_variables, signature
from .rules import NOT_MEASURED, UNKNOWN, ConfigStats, Decision, Evidence, Thresholds, decide
from .tree import GPU

Signature = tuple[tuple[str, str], ...]


@dataclass
class Entry:
    """Devices the list cannot tell apart (equal variables), and their decision."""

    variables: dict[str, str]
    devices: list[str] = field(default_factory=list)  #: every device seen with these facts
    current: list[str] = field(default_factory=list)  #: devices whose facts are these now
    evidence: Evidence = field(default_factory=Evidence)
    decision: Decision = field(default_factory=lambda: Decision(UNKNOWN, NOT_MEASURED))


@dataclass
class Allowlist:
    """One model's decisions, per entry (fact signature), for one delegate's list."""

    model_sha256: str
    model_name: str
    thresholds: Thresholds
    entries: list[Entry]
    delegate: str = GPU  #: whose configurations were judged (rules.LIST_DELEGATES)

    def entry_for(self, device_key: str) -> Entry | None:
        """The entry of a device's current facts."""
        return next((e for e in self.entries if device_key in e.current), None)


@dataclass
class _Acc:
    """ConfigStats being summed over result groups."""

    ok: int = 0
    failed: int = 0
    timed_out: int = 0
    infra: int = 0
    error: str = ""
    infra_error: str = ""
    sum_us: float = 0.0
    sum_sq: float = 0.0
    worst_run_cv: float | None = None
    max_error: float | None = None
    min_error: float | None = None
    diffs: int = 0
    fell_back: int | None = None
    total_ops: int | None = None
    quant: int | None = None

    def add(self, r: Mapping[str, Any]) -> None:
        ok = int(r["ok"] or 0)
        self.ok += ok
        for name in ("failed", "timed_out", "infra", "diffs"):
            setattr(self, name, getattr(self, name) + int(r[name] or 0))
        self.error = self.error or (r["error"] or "")
        self.infra_error = self.infra_error or (r["infra_error"] or "")
        if ok and r["mean_us"] is not None:
            self.sum_us += float(r["mean_us"]) * ok
            self.sum_sq += float(r["mean_sq"] or 0.0) * ok
        for name in ("worst_run_cv", "max_error", "fell_back", "total_ops"):
            if r[name] is not None:
                mine = getattr(self, name)
                setattr(self, name, r[name] if mine is None else max(mine, r[name]))
        if r["min_error"] is not None:
            mine = self.min_error
            self.min_error = r["min_error"] if mine is None else min(mine, r["min_error"])
        if r["quant"] is not None:
            self.quant = int(r["quant"]) if self.quant is None else min(self.quant, r["quant"])

    def stats(self, config: str, set_aside: int = 0) -> ConfigStats:
        mean = self.sum_us / self.ok if self.ok and self.sum_us else None
        cv = None
        if mean and self.ok > 1:
            var = max(self.sum_sq / self.ok - mean * mean, 0.0)
            cv = math.sqrt(var) / mean
        return ConfigStats(
            config,
            ok=self.ok,
            failed=self.failed,
            timed_out=self.timed_out,
            error=self.error,
            mean_us=mean,
            cv=cv,
            worst_run_cv=self.worst_run_cv,
            max_error=self.max_error,
            fell_back=self.fell_back,
            total_ops=self.total_ops,
            enable_quant=self.quant != 0,
            infra=self.infra,
            infra_error=self.infra_error,
            min_error=self.min_error,
            diffs=self.diffs,
            set_aside=set_aside,
        )


def evidence_query(models: Sequence[str] | None = None) -> Any:
    """Results aggregated per model, device, configuration, facts-as-they-ran and the
    configuration record their figures were measured under (`config_records`)."""
    ok = Result.outcome == SUCCEEDED
    device = device_caused()
    infra = and_(Result.outcome == FAILED, not_(device))
    diff = and_(ok, Result.max_avg_error.is_not(None))
    std = Result.benchmark["std_us"].as_float()
    quant = cast(Result.benchmark["options"]["enable_quant"].as_boolean(), Integer)
    q = (
        select(
            Result.model_sha256.label("model"),
            Result.device_key,
            Result.config,
            Result.device_facts,
            MEASURED_UNDER.label("measured_under"),
            NEWEST_OK.label("newest_ok"),
            func.sum(case((ok, 1), else_=0)).label("ok"),
            # independent device-caused failures: one per job
            func.count(distinct(case((device, Result.job_id)))).label("failed"),
            func.sum(case((Result.outcome == TIMED_OUT, 1), else_=0)).label("timed_out"),
            func.sum(case((infra, 1), else_=0)).label("infra"),
            func.max(case((device, Result.error))).label("error"),
            func.max(case((or_(infra, Result.outcome == TIMED_OUT), Result.error))).label(
                "infra_error"
            ),
            func.avg(case((ok, Result.avg_us))).label("mean_us"),
            func.avg(case((ok, Result.avg_us * Result.avg_us))).label("mean_sq"),
            func.max(case((ok, std / func.nullif(Result.avg_us, 0)))).label("worst_run_cv"),
            func.max(case((ok, Result.max_avg_error))).label("max_error"),
            func.min(case((ok, Result.max_avg_error))).label("min_error"),
            func.sum(case((diff, 1), else_=0)).label("diffs"),
            func.max(case((ok, Result.total_ops - Result.delegated_ops))).label("fell_back"),
            func.max(Result.total_ops).label("total_ops"),
            func.min(case((ok, quant))).label("quant"),
        )
        .where(Result.outcome != CANCELLED)
        .group_by(
            Result.model_sha256,
            Result.device_key,
            Result.config,
            Result.device_facts,
            MEASURED_UNDER,
        )
    )
    if models is not None:
        q = q.where(Result.model_sha256.in_(list(models)))
    return q


DEVICE_COLUMNS = (
    Device.key,
    Device.kind,
    Device.vendor,
    Device.model,
    Device.renderer,
    Device.driver_version,
    Device.api_version,
    Device.android_sdk,
    Device.host,
    Device.facts,
)


def load_devices(conn: Connection) -> dict[str, dict[str, Any]]:
    """Every registered device's list-relevant columns, by key."""
    rows = conn.execute(select(*DEVICE_COLUMNS).order_by(Device.key)).mappings()
    return {r["key"]: dict(r) for r in rows}


#: The shortest sha256 prefix that names a model (when it is unique).
MIN_PREFIX = 4


def resolve_model(conn: Connection, text: str, among: Any = None) -> tuple[str, str]:
    """(sha256, name) of the model named by a sha256, a unique sha256 prefix of MIN_PREFIX
    or more hex digits, or a file name; `among`: a condition on StoredModel limiting the
    models looked at (orchestrator.scope.models_of: one project's)."""
    text = text.strip()
    hex_prefix = len(text) >= MIN_PREFIX and all(c in "0123456789abcdef" for c in text.lower())
    rows = conn.execute(
        select(StoredModel.sha256, StoredModel.name).where(
            or_(
                StoredModel.sha256.startswith(text.lower()) if hex_prefix else False,
                StoredModel.name == text,
            ),
            true() if among is None else among,
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


@dataclass(frozen=True)
class Read:
    """What allowlists are decided from: aggregated evidence rows (evidence_query), the
    device table (load_devices) and the models wanted (sha256 -> name)."""

    rows: list[dict[str, Any]]
    devices: dict[str, dict[str, Any]]
    models: dict[str, str]


def read_evidence(
    engine: Engine,
    models: Iterable[str] | None = None,
    among: Any = None,
    evidence: Any = None,
) -> Read:
    """The evidence for `models` (sha256; default every stored model), one query for all;
    `among` limits the models (a condition on StoredModel) and `evidence` the results (one
    on Result) to one project's (orchestrator.scope)."""
    with engine.begin() as conn:
        listed = select(StoredModel.sha256, StoredModel.name)
        if among is not None:
            listed = listed.where(among)
        names = {r.sha256: r.name for r in conn.execute(listed)}
        if models is None:
            wanted = list(names)
        else:
            wanted = [m for m in models if among is None or m in names]
        query = evidence_query(wanted)
        if evidence is not None:
            query = query.where(evidence)
        rows = [dict(r) for r in conn.execute(query).mappings()]
        devices = load_devices(conn)
    return Read(rows, devices, {m: names.get(m, m) for m in wanted})


def decide_models(
    engine: Engine,
    thresholds: Thresholds,
    models: Iterable[str] | None = None,
    among: Any = None,
    evidence: Any = None,
    delegate: str = GPU,
) -> dict[str, Allowlist]:
    """Allowlists for `models` (sha256; default every stored model), one query for all;
    `among` and `evidence` as read_evidence's; `delegate`: whose list."""
    read = read_evidence(engine, models, among, evidence)
    return build_allowlists(read.rows, read.devices, read.models, thresholds, delegate)


def build_allowlists(
    rows: Sequence[Mapping[str, Any]],
    devices: Mapping[str, Mapping[str, Any]],
    models: Mapping[str, str],
    thresholds: Thresholds,
    delegate: str = GPU,
) -> dict[str, Allowlist]:
    """Allowlists from aggregated evidence rows and the device table (pure), judging the
    configurations of `delegate`."""
    accs: dict[tuple[str, Signature], dict[str, _Acc]] = defaultdict(dict)
    seen: dict[tuple[str, Signature], set[str]] = defaultdict(set)
    variables: dict[Signature, dict[str, str]] = {}
    host_cpu: dict[tuple[str, str], _Acc] = defaultdict(_Acc)
    placed = []
    read: dict[str, tuple[dict[str, str], Signature]] = {}  # a device's rows share its facts
    for r in rows:
        dev = devices.get(r["device_key"], {})
        facts = r["device_facts"] or dev or {"model": r["device_key"]}
        as_read = repr(facts)
        if as_read not in read:
            var = list_variables(facts)
            read[as_read] = var, signature(var)
        var, sig = read[as_read]
        variables[sig] = var
        seen[(r["model"], sig)].add(r["device_key"])
        placed.append({**r, "sig": sig, "kind": dev.get("kind"), "host": dev.get("host") or ""})
    kept, set_aside = keep_newest(placed, lambda r: (r["model"], r["sig"], r["config"]))
    for r in kept:
        accs[(r["model"], r["sig"])].setdefault(r["config"], _Acc()).add(r)
    reference = [
        r
        for r in placed
        if r["kind"] == metrics.CPU_REFERENCE_KIND and r["config"] == metrics.CPU_CONFIG
    ]
    for r in keep_newest(reference, lambda r: (r["model"], r["host"]))[0]:
        host_cpu[(r["model"], r["host"])].add(r)
    current: dict[Signature, list[str]] = defaultdict(list)
    for k, dev in devices.items():
        var = list_variables(dev)
        sig = signature(var)
        variables.setdefault(sig, var)
        current[sig].append(k)
    out = {}
    for model, name in models.items():
        sigs = {s for (m, s) in accs if m == model} | set(current)
        entries = []
        for sig in sorted(sigs):
            key = (model, sig)
            configs = {
                c: a.stats(c, set_aside.get((*key, c), 0)) for c, a in accs.get(key, {}).items()
            }
            keys = sorted(seen.get(key, set()) | set(current.get(sig, [])))
            cpu = configs.get(metrics.CPU_CONFIG)
            kind = _kind(keys, devices)
            cpu_us = metrics.cpu_baseline(
                cpu.mean_us if cpu and cpu.ok else None,
                _host_baseline(model, keys, devices, host_cpu),
                kind,
            )
            why = f"no CPU baseline ({metrics.no_baseline_reason(kind)})"
            evidence = Evidence(configs, cpu_us, why)
            decision = (
                decide(evidence, thresholds, delegate)
                if configs
                else Decision(UNKNOWN, NOT_MEASURED, "not measured")
            )
            entries.append(
                Entry(dict(variables[sig]), keys, sorted(current.get(sig, [])), evidence, decision)
            )
        out[model] = Allowlist(model, name, thresholds, entries, delegate)
    return out


def _kind(keys: Sequence[str], devices: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The device kind of an entry's devices (None when unknown or mixed)."""
    kinds = {devices[k].get("kind") for k in keys if k in devices}
    return kinds.pop() if len(kinds) == 1 else None


def _host_baseline(
    model: str,
    keys: Sequence[str],
    devices: Mapping[str, Mapping[str, Any]],
    host_cpu: Mapping[tuple[str, str], _Acc],
) -> float | None:
    """The CPU reference's mean latency on the hosts of these devices."""
    acc = _Acc()
    for host in sorted({devices[k].get("host") or "" for k in keys if k in devices}):
        a = host_cpu.get((model, host))
        if a and a.ok:
            acc.ok += a.ok
            acc.sum_us += a.sum_us
    return acc.sum_us / acc.ok if acc.ok else None


def build_allowlist(
    engine: Engine,
    model: str,
    thresholds: Thresholds,
    among: Any = None,
    evidence: Any = None,
    delegate: str = GPU,
) -> Allowlist:
    """The allowlist of one model (sha256, prefix or name); `among`, `evidence` and
    `delegate` as decide_models'."""
    with engine.begin() as conn:
        sha, _ = resolve_model(conn, model, among)
    return decide_models(engine, thresholds, [sha], among, evidence, delegate)[sha]
