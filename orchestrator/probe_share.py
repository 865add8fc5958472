"""Which device queues a reconciler pass reads in the broker: every queue whose device has
a dispatched job past the grace while their dispatched jobs number at most
`Timing.probe_messages`, else a share of them, the longest unread first, the rest in the
passes after. A pass's probe then reads about the same whatever the fleet's backlog: the
full probe read every message of every queue (9,000 in a 1,000-device fleet: 0.1 s on a
quiet 2-core machine, up to 1 s under the fleet's load, beyond the pass's 1 s).

A job is judged (lost, stalled) only in a pass that read its device's queue, against one
snapshot of those queues and the unacked hash (probes.RedisProbe.recheck); a probe that
cannot read named queues (a filesystem broker's folder, read whole) reads everything."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from farm_core.celery_app import queue_for
from farm_core.schema import DISPATCHED


@dataclass
class BrokerView:
    """What a pass read: the task ids seen (None: the broker could not be read) and the
    devices due a look whose queues it left for a later pass."""

    seen: set[str] | None
    unread: set[str] = field(default_factory=set)


def share(dispatched: Mapping[str, int], probed_at: Mapping[str, float], most: int) -> list[str]:
    """The devices of `dispatched` (device -> its dispatched jobs) to read now: the longest
    unread first (never read before all), until their jobs would pass `most` (one at least)."""
    order = sorted(dispatched, key=lambda d: (probed_at.get(d, float("-inf")), d))
    chosen: list[str] = []
    total = 0
    for device in order:
        if chosen and total + dispatched[device] > most:
            break
        chosen.append(device)
        total += dispatched[device]
    return chosen


def look(
    probe: Any, active: Iterable[Any], grace: datetime, now: datetime, most: int
) -> BrokerView:
    """The broker's view of `active`'s dispatched jobs (reconciler rows): the queues of the
    devices with one past `grace` (dispatched before it), `most` jobs' worth of them."""
    rows = [j for j in active if j.state == DISPATCHED]
    due = {j.device_key for j in rows if (j.dispatched_at or now) < grace}
    read_named = getattr(probe, "recheck", None)
    if read_named is None:
        return BrokerView(probe())
    held = Counter(j.device_key for j in rows if j.device_key in due)
    probed_at: dict[str, float] = probe.probed_at
    chosen = share(held, probed_at, most)
    seen = read_named([queue_for(d) for d in chosen])
    if seen is None:
        return BrokerView(None)
    stamp = time.monotonic()
    for device in chosen:
        probed_at[device] = stamp
    return BrokerView(seen, due.difference(chosen))
