"""An allowlist in the formats `devicefarm allowlist --format` writes.

A GPU list is LiteRT's compatibility list (any format). Another delegate's list has no
official format: it is the same tree with `devicefarm.<delegate>.*` properties, written
as devicedb JSON, CSV or JSON; never as the flatbuffer, which only LiteRT's
`GPUCompatibilityList` reads (BINARY_GPU_ONLY)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Any

from . import devicedb
from .collect import Allowlist, Entry
from .facts import ORDER
from .tree import GPU, Node

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
#: Another delegate's list names its best configuration in place of the GPU's options.
DELEGATE_CSV_COLUMNS = tuple("config" if c == "enable_quant" else c for c in CSV_COLUMNS)
BINARY_GPU_ONLY = (
    "devicedb-bin is LiteRT's GPU compatibility list, read only by GPUCompatibilityList; "
    "another delegate's list is written as devicedb-json, csv or json"
)


def listed(allowlist: Allowlist) -> list[Entry]:
    """The entries a list shows: no-op test devices (no list variables) never appear."""
    return [e for e in allowlist.entries if e.variables]


def tree(allowlist: Allowlist) -> list[Node]:
    """The decision tree of an allowlist (with SDK ranges where the decisions allow)."""
    entries = ((e.variables, e.decision) for e in listed(allowlist))
    return devicedb.build_tree(entries, delegate=allowlist.delegate)


def row(e: Entry, delegate: str = GPU) -> dict[str, Any]:
    """One entry as a flat row (CSV, tables): a GPU list's (CSV_COLUMNS) or another
    delegate's (DELEGATE_CSV_COLUMNS)."""
    d = e.decision
    out = {
        "status": d.status,
        "reason_code": d.code,
        "reason": d.reason,
        "precision": d.precision,
        "enable_quant": "" if d.enable_quant is None else str(d.enable_quant).lower(),
        "speedup": None if d.speedup is None else round(d.speedup, 3),
        "devices": " ".join(e.devices),
        **{v: e.variables.get(v, "") for v in ORDER},
    }
    if delegate != GPU:
        out["config"] = d.config
        del out["enable_quant"]
    return out


def to_csv(allowlist: Allowlist) -> str:
    buf = io.StringIO()
    gpu = allowlist.delegate == GPU
    w = csv.DictWriter(
        buf, fieldnames=CSV_COLUMNS if gpu else DELEGATE_CSV_COLUMNS, lineterminator="\n"
    )
    w.writeheader()
    for e in listed(allowlist):
        w.writerow(row(e, allowlist.delegate))
    return buf.getvalue()


def to_json(allowlist: Allowlist) -> str:
    which = {} if allowlist.delegate == GPU else {"delegate": allowlist.delegate}
    return (
        json.dumps(
            {
                **which,
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
    if fmt == "devicedb-bin" and allowlist.delegate != GPU:
        raise ValueError(f"a {allowlist.delegate} list: {BINARY_GPU_ONLY}")
    data = devicedb.encode(tree(allowlist))
    if fmt == "devicedb-bin":
        return data
    if fmt == "devicedb-json":  # printed from the flatbuffer: the JSON is the same tree
        return devicedb.to_json(devicedb.decode(data)).encode()
    raise ValueError(f"unknown format {fmt!r} (choose from: {', '.join(FORMATS)})")
