"""The evidence allowlists are decided from, kept: read once, then again in the background
as results come in.

The compatibility page took seconds on a 1,000-device farm: reading the evidence (an
aggregate over every result) and deciding 4,000 model x device entries. The evidence is the
same for every viewer of the same projects until a result, a model or a device's facts
change (queries.evidence_version); on a busy farm that is every few seconds. So the first
view reads it (and waits), later views get the kept one at once, and once it changed and
is MAX_AGE_S old one background thread reads it again for the views after it; the page
says when it was read. It is gathered into entries once (collect.gather) and stored in
the database at its version (evidence_store), so a fresh dashboard process reads the
gathered entries instead of every result while the version holds; where its version is not
stored, a fresh process takes the newest row read within MAX_AGE_S (a busy farm's usual
case: 1.0-2.7 s of reading at 1,000 devices) as if it had kept it, and reads again in the
background once that is MAX_AGE_S old. Lists are decided from those once per thresholds,
files made once.
Shared by the sessions of one dashboard process (Streamlit runs each in a thread): callers
must not change what they are given.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from dashboard import evidence_store, queries
from farm_core.schema import utcnow
from orchestrator.allowlist import export
from orchestrator.allowlist.collect import Allowlist, Gathered, Read, decide_gathered, gather
from orchestrator.allowlist.rules import Thresholds

#: The evidence is read again (in the background) at most this often, s.
MAX_AGE_S = 60.0
#: (database, projects) whose evidence is kept.
KEPT = 16
#: Thresholds whose lists are kept per evidence (a viewer trying a few).
THRESHOLDS_KEPT = 8
#: The version of evidence stored at a version not known (evidence_store.newest): never current.
OLDER = "older"


@dataclass
class Kept:
    """The evidence as read at `at` (UTC) at `version`, gathered into entries, and what
    was decided from it."""

    version: Any
    at: datetime
    made_s: float  #: time.monotonic() when read (from the results or the stored entries)
    gathered: Gathered
    lists: dict[Thresholds, dict[str, Allowlist]] = field(default_factory=dict)
    files: dict[tuple[Thresholds, str, str], bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Decided:
    """The allowlists under `thresholds`, from the evidence read at `at` (UTC)."""

    at: datetime
    lists: dict[str, Allowlist]
    thresholds: Thresholds
    kept: Kept

    def render(self, model: str, fmt: str) -> bytes:
        """One model's list in `fmt` (export.FORMATS), made once."""
        key = (self.thresholds, model, fmt)
        if key not in self.kept.files:
            self.kept.files[key] = export.render(self.lists[model], fmt)
        return self.kept.files[key]


_kept: OrderedDict[tuple[Any, ...], Kept] = OrderedDict()
_refreshing: dict[tuple[Any, ...], threading.Thread] = {}
_lock = threading.Lock()


def allowlists(
    engine: Engine,
    thresholds: Thresholds,
    projects: Any,
    read: Callable[[Engine, Any], Read] = queries.evidence,
    max_age_s: float = MAX_AGE_S,
    wait: bool = False,
) -> Decided:
    """The allowlists of `projects` under `thresholds`, from the kept evidence (`read`
    reads it: here the first time, in the background once it changed and is `max_age_s`
    old; `wait`: for that read), or from the evidence stored at its version, or, a first
    view, from the newest stored within `max_age_s` (read again as kept evidence is)."""
    key = (engine.url.render_as_string(), projects)
    version = queries.evidence_version(engine)
    with _lock:
        kept = _kept.get(key)
        if kept is not None:
            _kept.move_to_end(key)
    if kept is None:
        kept = _from_store(key, engine, projects, version, max_age_s)
    if kept is None:
        kept = _read(key, engine, projects, read, version)
    elif kept.version != version and time.monotonic() - kept.made_s >= max_age_s:
        with _lock:
            worker = _refreshing.get(key)
            if worker is None:
                worker = threading.Thread(
                    target=_read,
                    args=(key, engine, projects, read, version),
                    name="allowlist-evidence",
                    daemon=True,
                )
                _refreshing[key] = worker
                worker.start()
        if wait:
            worker.join()
            with _lock:
                kept = _kept.get(key, kept)
    lists = kept.lists.get(thresholds)
    if lists is None:
        lists = kept.lists[thresholds] = decide_gathered(kept.gathered, thresholds)
        while len(kept.lists) > THRESHOLDS_KEPT:  # the oldest first (dicts keep order)
            kept.lists.pop(next(iter(kept.lists)), None)
    return Decided(kept.at, lists, thresholds, kept)


def _from_store(
    key: tuple[Any, ...], engine: Engine, projects: Any, version: Any, max_age_s: float
) -> Kept | None:
    """The evidence stored at `version`, else the scope's newest stored evidence read within
    `max_age_s` (kept as if this process had read it then); None if neither."""
    stored = evidence_store.load(engine, projects, version)
    if stored is not None:
        gathered, at = stored
        kept = Kept(version, at, time.monotonic(), gathered)
    elif max_age_s > 0:
        now = utcnow()
        recent = evidence_store.newest(engine, projects, now - timedelta(seconds=max_age_s))
        if recent is None:
            return None
        gathered, at = recent
        age_s = max(0.0, (now - at).total_seconds())
        kept = Kept(OLDER, at, time.monotonic() - age_s, gathered)
    else:
        return None
    _keep(key, kept)
    return kept


def _keep(key: tuple[Any, ...], kept: Kept) -> None:
    with _lock:
        _kept[key] = kept
        _kept.move_to_end(key)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)


def _read(
    key: tuple[Any, ...],
    engine: Engine,
    projects: Any,
    read: Callable[[Engine, Any], Read],
    version: Any,
) -> Kept:
    try:
        stored = evidence_store.load(engine, projects, version)
        if stored is None:
            # read after `version`: never older than it (a result stored in between is in)
            at, evidence = utcnow(), read(engine, projects)
            gathered = gather(evidence.rows, evidence.devices, evidence.models)
            evidence_store.store(engine, projects, version, gathered, at)
        else:
            gathered, at = stored
        kept = Kept(version, at, time.monotonic(), gathered)
        _keep(key, kept)
        return kept
    finally:
        with _lock:
            _refreshing.pop(key, None)


def forget() -> None:
    """Drop the evidence this process keeps, as a fresh dashboard process has none."""
    with _lock:
        _kept.clear()
