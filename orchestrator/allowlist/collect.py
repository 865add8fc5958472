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
    or_,
    select,
    true,
)

from delegate_runtime.errors import JobError
from farm_core import metrics
from farm_core.schema import Device, StoredModel

from .config_records import keep_newest
from .evidence_query import read_rows
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
        self.failed += int(r["failed"] or 0)
        self.timed_out += int(r["timed_out"] or 0)
        self.infra += int(r["infra"] or 0)
        self.diffs += int(r["diffs"] or 0)
        self.error = self.error or (r["error"] or "")
        self.infra_error = self.infra_error or (r["infra_error"] or "")
        if ok and r["mean_us"] is not None:
            self.sum_us += float(r["mean_us"]) * ok
            self.sum_sq += float(r["mean_sq"] or 0.0) * ok
        self.worst_run_cv = _max(self.worst_run_cv, r["worst_run_cv"])
        self.max_error = _max(self.max_error, r["max_error"])
        self.fell_back = _max(self.fell_back, r["fell_back"])
        self.total_ops = _max(self.total_ops, r["total_ops"])
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


def _max(mine: Any, new: Any) -> Any:
    """The larger of two figures, either of which may be missing (None)."""
    if new is None:
        return mine
    return new if mine is None else max(mine, new)


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
        rows = read_rows(conn, wanted, evidence)
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
    return decide_gathered(gather(rows, devices, models), thresholds, delegate)


@dataclass(frozen=True)
class Gathered:
    """Each model's entries before any decision (what no threshold changes): per entry its
    variables, devices seen, devices current and evidence. Shared: do not change it."""

    models: dict[str, str]
    entries: dict[str, list[tuple[dict[str, str], list[str], list[str], Evidence]]]


def decide_gathered(
    g: Gathered, thresholds: Thresholds, delegate: str = GPU
) -> dict[str, Allowlist]:
    """The allowlists of gathered evidence under `thresholds`, judging `delegate`'s
    configurations."""
    out = {}
    for model, name in g.models.items():
        entries = [
            Entry(
                dict(variables),
                list(keys),
                list(current),
                evidence,
                decide(evidence, thresholds, delegate)
                if evidence.configs
                else Decision(UNKNOWN, NOT_MEASURED, "not measured"),
            )
            for variables, keys, current, evidence in g.entries[model]
        ]
        out[model] = Allowlist(model, name, thresholds, entries, delegate)
    return out


def gather(
    rows: Sequence[Mapping[str, Any]],
    devices: Mapping[str, Mapping[str, Any]],
    models: Mapping[str, str],
) -> Gathered:
    """Evidence rows and the device table as each model's entries (pure): rows are placed
    by the signature of the facts they ran with, devices by their current facts."""
    sigs = _Signatures()
    row_sig: dict[int, int] = {}  # id(row) -> signature number
    seen: dict[tuple[str, int], set[str]] = defaultdict(set)
    for r in rows:
        key = r["device_key"]
        facts = r["device_facts"] or devices.get(key) or {"model": key}
        s = row_sig[id(r)] = sigs.of_facts(facts)
        seen[(r["model"], s)].add(key)
    current: dict[int, list[str]] = defaultdict(list)
    for k, dev in devices.items():
        current[sigs.of_device(dev)].append(k)
    kept, set_aside = keep_newest(rows, lambda r: (r["model"], row_sig[id(r)], r["config"]))
    accs: dict[tuple[str, int], dict[str, _Acc]] = defaultdict(dict)
    for r in kept:
        accs[(r["model"], row_sig[id(r)])].setdefault(r["config"], _Acc()).add(r)
    host_cpu: dict[tuple[str, str], _Acc] = defaultdict(_Acc)
    reference = [r for r in rows if r["config"] == metrics.CPU_CONFIG and _is_reference(r, devices)]
    for r in keep_newest(reference, lambda r: (r["model"], _host(r, devices)))[0]:
        host_cpu[(r["model"], _host(r, devices))].add(r)
    order = sigs.order()
    by_model: dict[str, set[int]] = defaultdict(set)
    for m, s in accs:
        by_model[m].add(s)
    entries = {}
    for model in models:
        listed = []
        for s in sorted(by_model.get(model, set()) | set(current), key=order.__getitem__):
            key = (model, s)
            configs = {
                c: a.stats(c, set_aside.get((model, s, c), 0)) for c, a in accs.get(key, {}).items()
            }
            keys = sorted(seen.get(key, set()) | set(current.get(s, [])))
            cpu = configs.get(metrics.CPU_CONFIG)
            kind = _kind(keys, devices)
            cpu_us = metrics.cpu_baseline(
                cpu.mean_us if cpu and cpu.ok else None,
                _host_baseline(model, keys, devices, host_cpu),
                kind,
            )
            why = f"no CPU baseline ({metrics.no_baseline_reason(kind)})"
            evidence = Evidence(configs, cpu_us, why)
            listed.append((sigs.variables[s], keys, sorted(current.get(s, [])), evidence))
        entries[model] = listed
    return Gathered(dict(models), entries)


class _Signatures:
    """Fact signatures numbered as they are met, and each one's variables (those of the
    last result read with it, else of the first device). Rows that share one facts dict
    share the work."""

    def __init__(self) -> None:
        self.number: dict[Signature, int] = {}
        self.variables: list[dict[str, str]] = []
        self._facts: dict[int, tuple[Any, int, dict[str, str]]] = {}  # by id(facts)
        self._read: dict[str, tuple[int, dict[str, str]]] = {}  # by repr(facts)

    def of_facts(self, facts: Mapping[str, Any]) -> int:
        """A result's facts' signature number; their variables become the signature's."""
        hit = self._facts.get(id(facts))
        if hit is not None and hit[0] is facts:
            s, var = hit[1], hit[2]
        else:
            as_read = repr(facts)
            if as_read not in self._read:
                var = list_variables(facts)
                self._read[as_read] = self._number(var), var
            s, var = self._read[as_read]
            self._facts[id(facts)] = (facts, s, var)  # holding facts keeps its id unique
        self.variables[s] = var
        return s

    def of_device(self, device: Mapping[str, Any]) -> int:
        """A device row's signature number."""
        return self._number(list_variables(device))

    def _number(self, var: dict[str, str]) -> int:
        sig = signature(var)
        if sig not in self.number:
            self.number[sig] = len(self.variables)
            self.variables.append(var)
        return self.number[sig]

    def order(self) -> list[int]:
        """Each number's rank in signature order (the entries' order)."""
        rank = [0] * len(self.variables)
        for i, sig in enumerate(sorted(self.number)):
            rank[self.number[sig]] = i
        return rank


def _is_reference(r: Mapping[str, Any], devices: Mapping[str, Mapping[str, Any]]) -> bool:
    return devices.get(r["device_key"], {}).get("kind") == metrics.CPU_REFERENCE_KIND


def _host(r: Mapping[str, Any], devices: Mapping[str, Mapping[str, Any]]) -> str:
    return devices.get(r["device_key"], {}).get("host") or ""


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
