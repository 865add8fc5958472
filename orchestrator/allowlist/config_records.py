"""Which results a group's figures may come from: those measured under its newest
configuration record (`results.config_fingerprint`), never an average across records.

A group (facts signature and configuration, or a host's CPU reference) is measured under
the record of its newest successful result, by result id; successful results under any
other record (an older switch, a profiled run, one stored before records were kept) are
set aside and counted. A failed result produced no figure and keeps no record, so it is
kept whatever the record: its cause (`causes`) decides whether it is evidence.

The evidence query groups by `MEASURED_UNDER`; the choice is made here, on its aggregated
rows, because a facts signature is computed from the stored facts, not in SQL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from sqlalchemy import case, func

from farm_core.schema import SUCCEEDED, Result

#: SQL: the record a successful result was measured under; NULL for the rest (no figure).
MEASURED_UNDER = case((Result.outcome == SUCCEEDED, Result.config_fingerprint))
#: SQL: a group's newest successful result id.
NEWEST_OK = func.max(case((Result.outcome == SUCCEEDED, Result.id)))

Row = Mapping[str, Any]


def keep_newest(
    rows: Iterable[Row], group: Callable[[Row], Hashable]
) -> tuple[list[Row], dict[Hashable, int]]:
    """The rows (with `measured_under`, `newest_ok` and `ok`) of each group's newest
    record, and rows without a figure; and per group, the successful results set aside."""
    rows = list(rows)
    newest: dict[Hashable, tuple[int, str]] = {}
    for r in rows:
        if r["measured_under"] is None:
            continue
        k = group(r)
        if k not in newest or r["newest_ok"] > newest[k][0]:
            newest[k] = (r["newest_ok"], r["measured_under"])
    kept: list[Row] = []
    set_aside: dict[Hashable, int] = defaultdict(int)
    for r in rows:
        k = group(r)
        if r["measured_under"] is None or r["measured_under"] == newest[k][1]:
            kept.append(r)
        else:
            set_aside[k] += int(r["ok"] or 0)
    return kept, dict(set_aside)
