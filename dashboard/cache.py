"""Allowlists a page reuses: decided once, then again in the background as results come in.

The compatibility page's allowlists and list files took seconds on a 1,000-device farm.
They are the same for every viewer of the same projects until a result, a model or a
device's facts change (queries.evidence_version); on a busy farm that is every few
seconds. So the first view decides them (and waits), later views get the kept ones at
once, and once the evidence changed and they are MAX_AGE_S old, one background thread
decides them again for the views after it; the page says when its lists were decided.
Shared by the sessions of one dashboard process (Streamlit runs each in a thread):
callers must not change what they are given.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from dashboard import queries
from farm_core.schema import utcnow
from orchestrator.allowlist import export
from orchestrator.allowlist.collect import Allowlist
from orchestrator.allowlist.rules import Thresholds

#: Lists are decided again (in the background) at most this often, s.
MAX_AGE_S = 60.0
#: (database, thresholds, projects) kept: a few viewers trying thresholds.
KEPT = 32


@dataclass
class Decided:
    """Allowlists as decided at `at` (UTC) from the evidence at `version`."""

    version: Any
    at: datetime
    lists: dict[str, Allowlist]
    made_s: float  #: time.monotonic() when decided
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)  #: (model, fmt)

    def render(self, model: str, fmt: str) -> bytes:
        """One model's list in `fmt` (export.FORMATS), made once."""
        if (model, fmt) not in self.files:
            self.files[model, fmt] = export.render(self.lists[model], fmt)
        return self.files[model, fmt]


_kept: OrderedDict[tuple[Any, ...], Decided] = OrderedDict()
_refreshing: dict[tuple[Any, ...], threading.Thread] = {}
_lock = threading.Lock()


def allowlists(
    engine: Engine,
    thresholds: Thresholds,
    projects: Any,
    decide: Callable[..., dict[str, Allowlist]] = queries.allowlists,
    max_age_s: float = MAX_AGE_S,
    wait: bool = False,
) -> Decided:
    """The allowlists of `projects` under `thresholds` (`decide` decides them): decided
    here the first time; then the kept ones, decided again in the background once the
    evidence changed and they are `max_age_s` old (`wait`: for that decision)."""
    key = (engine.url.render_as_string(), thresholds, projects)
    version = queries.evidence_version(engine)
    with _lock:
        kept = _kept.get(key)
    if kept is None:
        return _decide(key, engine, thresholds, projects, decide, version)
    with _lock:
        if _kept.get(key) is kept:
            _kept.move_to_end(key)
    if kept.version != version and time.monotonic() - kept.made_s >= max_age_s:
        with _lock:
            worker = _refreshing.get(key)
            if worker is None:
                worker = threading.Thread(
                    target=_decide,
                    args=(key, engine, thresholds, projects, decide, version),
                    name="allowlists",
                    daemon=True,
                )
                _refreshing[key] = worker
                worker.start()
        if wait:
            worker.join()
            return _kept.get(key, kept)
    return kept


def _decide(
    key: tuple[Any, ...],
    engine: Engine,
    thresholds: Thresholds,
    projects: Any,
    decide: Callable[..., dict[str, Allowlist]],
    version: Any,
) -> Decided:
    try:
        lists = decide(engine, thresholds, projects=projects)
        made = Decided(version, utcnow(), lists, time.monotonic())
        _keep(key, made)
        return made
    finally:
        with _lock:
            _refreshing.pop(key, None)


def _keep(key: tuple[Any, ...], decided: Decided) -> None:
    with _lock:
        _kept[key] = decided
        _kept.move_to_end(key)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
