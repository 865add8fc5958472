"""What fills of device queues (farm_core.device_queue) serialise, on PostgreSQL: advisory
locks held to the end of the fill's transaction. SQLite's BEGIN IMMEDIATE already runs one
fill at a time.

- A fill of one device (a worker's, after its jobs) takes the farm's fill lock shared and
  its device's lock: fills of different devices run at once, two fills of one device never
  (its queue is never filled past its depth, nor one job picked twice).
- A fill of several devices (submission, the reconciler) takes the farm's lock exclusively
  and runs alone.
- A fill that may send jobs of a project with a concurrent-jobs quota takes that project's
  lock before it counts the project's jobs out, so two fills never both take its last place.

Locks are always taken in this order (farm, device, projects by name), so fills never wait
on each other in a cycle. Sending never needed these locks to be unique: a job is marked
dispatched by compare-and-set before its message goes (farm_core.jobs.take_many).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, text

#: The farm's fill lock ("dfq1").
FARM = 0x64667131
#: Namespaces of the device and project locks: above 2**32, so they never meet FARM nor
#: the claim's project locks (farm_core.holds.project_lock), which are 32-bit.
_DEVICE_SPACE = 0x6466_0001 << 32
_PROJECT_SPACE = 0x6466_0002 << 32

_ONE_DEVICE = text("SELECT pg_advisory_xact_lock_shared(:farm), pg_advisory_xact_lock(:device)")
_ALL_DEVICES = text("SELECT pg_advisory_xact_lock(:farm)")
_PROJECT = text("SELECT pg_advisory_xact_lock(:project)")


def _key(space: int, name: str) -> int:
    return space | zlib.crc32(name.encode())


def lock_devices(conn: Connection, keys: Sequence[str]) -> None:
    """Serialise this fill of `keys` against every fill that touches them."""
    if conn.dialect.name != "postgresql" or not keys:
        return
    if len(keys) == 1:
        conn.execute(_ONE_DEVICE, {"farm": FARM, "device": _key(_DEVICE_SPACE, keys[0])})
    else:
        conn.execute(_ALL_DEVICES, {"farm": FARM})


def lock_projects(conn: Connection, projects: Iterable[str]) -> None:
    """Serialise this fill against others that may send jobs of `projects` (those with a
    concurrent-jobs quota); call before counting their jobs out."""
    if conn.dialect.name != "postgresql":
        return
    for project in sorted(set(projects)):
        conn.execute(_PROJECT, {"project": _key(_PROJECT_SPACE, project)})
