"""The evidence allowlists are decided from, kept per model: read once, then again in the
background as results come in.

The compatibility page took seconds on a 1,000-device farm: reading the evidence (an
aggregate over every result) and deciding 1,000 entries per model, for 100 models. It now
shows a page of models at a time, and only their evidence is read, kept and decided. A
model's evidence is the same for every viewer of the same projects until a result of that
model or a device's facts change (queries.evidence_versions); on a busy farm that is every
few seconds for the models being measured. So a model's first view reads it (and waits),
later views get the kept one at once, and once it changed and is MAX_AGE_S old one
background thread (per scope) reads the changed models of the page again for the views
after it; the page says when it was read. It is gathered into entries once
(collect.gather) and stored in the database at its version, a row per model
(evidence_store), so a fresh dashboard process reads the gathered entries instead of the
results while the version holds; where its version is not stored, a fresh process takes a
model's newest row read within MAX_AGE_S (a busy farm's usual case) as if it had kept it,
and reads again in the background once that is MAX_AGE_S old. Lists are decided from those
once per thresholds, files made once.
Shared by the sessions of one dashboard process (Streamlit runs each in a thread): callers
must not change what they are given.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from dashboard import evidence_store, queries
from farm_core.schema import utcnow
from orchestrator.allowlist import export
from orchestrator.allowlist.collect import Allowlist, Gathered, Read, decide_gathered, gather
from orchestrator.allowlist.rules import Thresholds

#: A model's evidence is read again (in the background) at most this often, s.
MAX_AGE_S = 60.0
#: Models' evidence kept (of any database and projects): about 2 MB each at 1,000 devices.
KEPT = 256
#: Thresholds whose lists are kept per model's evidence (a viewer trying a few).
THRESHOLDS_KEPT = 8
#: The version of evidence stored at a version not known (evidence_store.newest): never current.
OLDER = "older"

#: Reads the evidence of (engine, projects, models): queries.evidence.
Reader = Callable[[Engine, Any, Sequence[str]], Read]


@dataclass
class Kept:
    """One model's evidence as read at `at` (UTC) at `version`, gathered into entries
    (a Gathered of that model only), and what was decided from it."""

    version: Any
    at: datetime
    made_s: float  #: time.monotonic() when read (from the results or the stored entries)
    gathered: Gathered
    lists: dict[Thresholds, Allowlist] = field(default_factory=dict)
    files: dict[tuple[Thresholds, str], bytes] = field(default_factory=dict)

    def decide(self, thresholds: Thresholds) -> Allowlist:
        """The model's list under `thresholds`, decided once."""
        allowlist = self.lists.get(thresholds)
        if allowlist is None:
            allowlist = self.lists[thresholds] = next(
                iter(decide_gathered(self.gathered, thresholds).values())
            )
            while len(self.lists) > THRESHOLDS_KEPT:  # the oldest first (dicts keep order)
                self.lists.pop(next(iter(self.lists)), None)
        return allowlist


@dataclass(frozen=True)
class Decided:
    """The allowlists of the models asked for under `thresholds`, in the order asked, from
    the evidence read at `at` (UTC; the oldest of theirs); `kept`: each model's."""

    at: datetime
    lists: dict[str, Allowlist]
    thresholds: Thresholds
    kept: dict[str, Kept]

    def render(self, model: str, fmt: str) -> bytes:
        """One model's list in `fmt` (export.FORMATS), made once."""
        files, key = self.kept[model].files, (self.thresholds, fmt)
        if key not in files:
            files[key] = export.render(self.lists[model], fmt)
        return files[key]


_kept: OrderedDict[tuple[Any, ...], Kept] = OrderedDict()
_refreshing: dict[tuple[Any, ...], threading.Thread] = {}
_lock = threading.Lock()


def allowlists(
    engine: Engine,
    thresholds: Thresholds,
    projects: Any,
    models: Sequence[str] | None = None,
    read: Reader = queries.evidence,
    max_age_s: float = MAX_AGE_S,
    wait: bool = False,
) -> Decided:
    """The allowlists of `models` (sha256; default every one of `projects`, by name) under
    `thresholds`, each from its kept evidence (`read` reads it: here the first time, in the
    background once it changed and is `max_age_s` old; `wait`: for that read), or from the
    evidence stored at its version, or, a first view, from its newest stored within
    `max_age_s` (read again as kept evidence is). A model not found is left out."""
    scope = (engine.url.render_as_string(), projects)
    if models is None:
        models = list(queries.list_models(engine, projects))
    versions = queries.evidence_versions(engine, models)
    kept = _get(scope, models)
    missing = [m for m in models if m not in kept]
    if missing:
        kept |= _from_store(scope, engine, projects, _of(versions, missing), max_age_s)
        missing = [m for m in missing if m not in kept]
    if missing:
        kept |= _read(scope, engine, projects, read, _of(versions, missing))
    now = time.monotonic()
    stale = [m for m, k in kept.items() if k.version != versions[m] and now - k.made_s >= max_age_s]
    if stale:
        with _lock:
            worker = _refreshing.get(scope)
            if worker is None:
                worker = threading.Thread(
                    target=_refresh,
                    args=(scope, engine, projects, read, _of(versions, stale)),
                    name="allowlist-evidence",
                    daemon=True,
                )
                _refreshing[scope] = worker
                worker.start()
        if wait:
            worker.join()
            kept |= _get(scope, stale)
    shown = [m for m in models if m in kept]
    lists = {m: kept[m].decide(thresholds) for m in shown}
    at = min((kept[m].at for m in shown), default=utcnow())
    return Decided(at, lists, thresholds, {m: kept[m] for m in shown})


def _of(versions: dict[str, Any], models: Sequence[str]) -> dict[str, Any]:
    return {m: versions[m] for m in models}


def _get(scope: tuple[Any, ...], models: Sequence[str]) -> dict[str, Kept]:
    """The evidence this process keeps of `models`, by model (the most recently used last)."""
    out = {}
    with _lock:
        for m in models:
            kept = _kept.get((*scope, m))
            if kept is not None:
                _kept.move_to_end((*scope, m))
                out[m] = kept
    return out


def _from_store(
    scope: tuple[Any, ...],
    engine: Engine,
    projects: Any,
    versions: dict[str, Any],
    max_age_s: float,
) -> dict[str, Kept]:
    """The evidence of the models stored at their `versions`, else each one's newest stored
    evidence read within `max_age_s` (kept as if this process had read it then), by model."""
    made = time.monotonic()
    found = {
        m: Kept(versions[m], at, made, g)
        for m, (g, at) in evidence_store.load(engine, projects, versions).items()
    }
    rest = [m for m in versions if m not in found]
    if rest and max_age_s > 0:
        now = utcnow()
        recent = evidence_store.newest(engine, projects, now - timedelta(seconds=max_age_s), rest)
        for m, (g, at) in recent.items():
            age_s = max(0.0, (now - at).total_seconds())
            found[m] = Kept(OLDER, at, made - age_s, g)
    _keep(scope, found)
    return found


def _keep(scope: tuple[Any, ...], kept: dict[str, Kept]) -> None:
    with _lock:
        for m, k in kept.items():
            _kept[(*scope, m)] = k
            _kept.move_to_end((*scope, m))
        while len(_kept) > KEPT:
            _kept.popitem(last=False)


def _read(
    scope: tuple[Any, ...],
    engine: Engine,
    projects: Any,
    read: Reader,
    versions: dict[str, Any],
) -> dict[str, Kept]:
    """The evidence of the models read from the results (after their `versions` were:
    never older than them, a result stored in between is in), stored and kept."""
    at, evidence = utcnow(), read(engine, projects, list(versions))
    gathered = gather(evidence.rows, evidence.devices, evidence.models)
    found = [m for m in gathered.models if m in versions]
    evidence_store.store(engine, projects, _of(versions, found), gathered, at)
    made = time.monotonic()
    kept = {
        m: Kept(versions[m], at, made, Gathered({m: gathered.models[m]}, {m: gathered.entries[m]}))
        for m in found
    }
    _keep(scope, kept)
    return kept


def _refresh(
    scope: tuple[Any, ...],
    engine: Engine,
    projects: Any,
    read: Reader,
    versions: dict[str, Any],
) -> None:
    """The background read of changed models: those another process stored at their
    `versions` meanwhile from the store, the others from the results."""
    try:
        made = time.monotonic()
        kept = {
            m: Kept(versions[m], at, made, g)
            for m, (g, at) in evidence_store.load(engine, projects, versions).items()
        }
        _keep(scope, kept)
        rest = [m for m in versions if m not in kept]
        if rest:
            _read(scope, engine, projects, read, _of(versions, rest))
    finally:
        with _lock:
            _refreshing.pop(scope, None)


def forget() -> None:
    """Drop the evidence this process keeps, as a fresh dashboard process has none."""
    with _lock:
        _kept.clear()
