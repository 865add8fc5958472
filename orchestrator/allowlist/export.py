"""An allowlist in the formats `devicefarm allowlist --format` writes."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Any

from . import devicedb
from .collect import Allowlist, Entry
from .facts import ORDER
from .tree import Node

FORMATS = ("devicedb-json", "devicedb-bin", "csv", "json")
CSV_COLUMNS = (
    "status",
    "reason_code",
    "reason",
    "precision",
    "enable_quant",
    "speedup",
    "devices",
    *ORDER,
)


def listed(allowlist: Allowlist) -> list[Entry]:
    """The entries a list shows: no-op test devices (no list variables) never appear."""
    return [e for e in allowlist.entries if e.variables]


def tree(allowlist: Allowlist) -> list[Node]:
    """The decision tree of an allowlist (with SDK ranges where the decisions allow)."""
    return devicedb.build_tree((e.variables, e.decision) for e in listed(allowlist))


def row(e: Entry) -> dict[str, Any]:
    """One entry as a flat row (CSV, tables)."""
    d = e.decision
    return {
        "status": d.status,
        "reason_code": d.code,
        "reason": d.reason,
        "precision": d.precision,
        "enable_quant": "" if d.enable_quant is None else str(d.enable_quant).lower(),
        "speedup": None if d.speedup is None else round(d.speedup, 3),
        "devices": " ".join(e.devices),
        **{v: e.variables.get(v, "") for v in ORDER},
    }


def to_csv(allowlist: Allowlist) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for e in listed(allowlist):
        w.writerow(row(e))
    return buf.getvalue()


def to_json(allowlist: Allowlist) -> str:
    return (
        json.dumps(
            {
                "model": {"sha256": allowlist.model_sha256, "name": allowlist.model_name},
                "thresholds": asdict(allowlist.thresholds),
                "entries": [
                    {
                        "variables": e.variables,
                        "devices": e.devices,
                        "current_devices": e.current,
                        "decision": asdict(e.decision),
                        # results under other configuration records, not counted
                        "set_aside": e.evidence.set_aside,
                    }
                    for e in listed(allowlist)
                ],
            },
            indent=2,
        )
        + "\n"
    )


def render(allowlist: Allowlist, fmt: str, sdk_minimum: bool = True) -> bytes:
    """The allowlist in `fmt` (one of FORMATS), as bytes to write.

    `sdk_minimum` is accepted for old callers and ignored: SDK ranges are always written
    where the measurements support them (`sdk_ranges`)."""
    if fmt == "csv":
        return to_csv(allowlist).encode()
    if fmt == "json":
        return to_json(allowlist).encode()
    data = devicedb.encode(tree(allowlist))
    if fmt == "devicedb-bin":
        return data
    if fmt == "devicedb-json":  # printed from the flatbuffer: the JSON is the same tree
        return devicedb.to_json(devicedb.decode(data)).encode()
    raise ValueError(f"unknown format {fmt!r} (choose from: {', '.join(FORMATS)})")
