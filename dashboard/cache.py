"""Allowlists a page reuses while the farm's evidence is unchanged, or for a short while.

The compatibility page's allowlists and list files took seconds on a 1,000-device farm.
They are the same for every viewer of the same projects until a result, a model or a
device's facts change (queries.evidence_version); on a busy farm that is every few
seconds, so lists decided less than MAX_AGE_S ago are reused as they are, and the page
says when they were decided. Shared by the sessions of one dashboard process (Streamlit
runs each in a thread): callers must not change what they are given.
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

#: Lists decided this recently are reused even if results came in since, s.
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
_lock = threading.Lock()


def allowlists(
    engine: Engine,
    thresholds: Thresholds,
    projects: Any,
    decide: Callable[..., dict[str, Allowlist]] = queries.allowlists,
    max_age_s: float = MAX_AGE_S,
) -> Decided:
    """The allowlists of `projects` under `thresholds`: reused while the evidence is
    unchanged or they are younger than `max_age_s`, else decided again (`decide`)."""
    key = (engine.url.render_as_string(), thresholds, projects)
    version = queries.evidence_version(engine)
    with _lock:
        kept = _kept.get(key)
    if kept is not None and (kept.version == version or time.monotonic() - kept.made_s < max_age_s):
        with _lock:
            if key in _kept:
                _kept.move_to_end(key)
        return kept
    made = Decided(
        version, utcnow(), decide(engine, thresholds, projects=projects), time.monotonic()
    )
    with _lock:
        _kept[key] = made
        _kept.move_to_end(key)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return made
