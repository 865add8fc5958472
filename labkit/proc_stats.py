"""The processes of a process group, their proportional memory (PSS) and CPU time, from
/proc."""

from __future__ import annotations

import os
from pathlib import Path


def session_pids(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid`."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def pss_kib(pid: int) -> int:
    """A process's PSS in KiB (/proc/PID/smaps_rollup); 0 when it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:"))


def group_pss_mib(pgids: list[int]) -> tuple[int, float]:
    """(processes, PSS in MiB) of every process in the process groups `pgids`."""
    pids = [p for g in pgids for p in session_pids(g)]
    return len(pids), sum(pss_kib(p) for p in pids) / 1024


def group_cpu_s(pgids: list[int]) -> float:
    """CPU seconds (user and system) spent so far by the live processes of `pgids`."""
    ticks = 0
    for pid in (p for g in pgids for p in session_pids(g)):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")
