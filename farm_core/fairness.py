"""Fair shares between projects on shared devices: which queued jobs a device takes next.

Within the most urgent priority waiting, the project with the fewest jobs out (dispatched
or running, farm-wide) goes first; between equals, the one served longest ago. So one
project's 10,000-job campaign takes turns with another's 10 jobs instead of running first,
and priorities keep their meaning. Within a project, jobs go by priority, then in order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

T = TypeVar("T")
_NEVER = datetime.min


@dataclass
class Share:
    """A project's standing: jobs out now, when it was last served, how many more its
    concurrent quota lets out (None: no limit)."""

    out: int = 0
    last_served: datetime | None = None
    room: int | None = None


def pick(
    queues: Mapping[str, Sequence[T]],
    priority: Callable[[T], int],
    shares: Mapping[str, Share],
    slots: int,
    now: datetime,
) -> list[T]:
    """Up to `slots` jobs, in the order to send them, from each project's queue (its jobs
    by priority, then in order). `shares` is updated as jobs are picked."""
    heads = {p: 0 for p, q in queues.items() if q}
    picked: list[T] = []
    while len(picked) < slots:
        ready = [p for p, i in heads.items() if i < len(queues[p]) and _room(shares[p])]
        if not ready:
            break

        def rank(p: str) -> tuple:
            s = shares[p]
            return (-priority(queues[p][heads[p]]), s.out, s.last_served or _NEVER, p)

        best = min(ready, key=rank)
        picked.append(queues[best][heads[best]])
        heads[best] += 1
        share = shares[best]
        share.out += 1
        share.last_served = now + timedelta(microseconds=len(picked))  # later picks: later
        if share.room is not None:
            share.room -= 1
    return picked


def _room(share: Share) -> bool:
    return share.room is None or share.room > 0
