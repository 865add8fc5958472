"""`devicefarm devices`: registered devices, their facts, liveness and health, as a table."""

from __future__ import annotations

import argparse
from datetime import timedelta

from delegate_runtime.printable import printable

from . import common

#: Table columns: (header, row key).
COLUMNS = (
    ("device", "key"),
    ("state", "alive"),
    ("health", "health"),
    ("host", "host"),
    ("model", "model"),
    ("driver", "driver_version"),
    ("seen", "seen"),
    ("tags", "tags"),
    ("reason", "health_reason"),
)
#: The longest health reason shown (a canary's failure can hold a whole build log).
REASON_CHARS = 100


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_db(p)


def _reason(reason: str | None) -> str:
    """A health reason's first line, cut to REASON_CHARS."""
    line = (reason or "").strip().split("\n", 1)[0]
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def table(rows: list[dict]) -> str:
    """The rows as aligned columns, the health reason last (facts come from devices: no
    control bytes printed)."""
    cells = [[h for h, _ in COLUMNS]]
    shown = [r | {"health_reason": _reason(r.get("health_reason"))} for r in rows]
    cells += [[printable(r.get(k) or "-") for _, k in COLUMNS] for r in shown]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def run(args: argparse.Namespace) -> int:
    from farm_core.schema import utcnow
    from farm_core.settings import Timing
    from orchestrator.report import device_rows

    cutoff = utcnow() - timedelta(seconds=Timing.from_env().offline_after_s)
    rows = device_rows(common.engine(args))
    if not rows:
        print("no devices registered (start `devicefarm worker`)")
        return 0
    for r in rows:
        r["alive"] = "online" if r["last_seen"] >= cutoff else "offline"
        r["seen"] = f"{r['last_seen']:%H:%M:%S}"
        r["tags"] = ",".join(r["tags"] or [])
    print(table(rows))
    return 0
