"""Which live devices a reconciler pass looks at for lost messages and stalls.

A dispatch past the grace is looked for in the broker, and its device checked for a stall,
only on the devices a pass looks at: at most `Timing.probe_devices` live ones, those looked
at longest ago, so a large fleet is covered in turn (1,000 devices at 250 a pass: each
every four passes, seconds apart, far inside `lost_confirm_s`) and a pass reads a share of
the dispatches and queues. In a 1,000-device fleet where every device held a dispatch past
the grace, reading all of them and probing all 1,000 queues took 0.2-0.8 s and 0.3-0.7 s
of each pass under load (bench/bench_fleet.py). A farm of at most that many live devices
is looked at whole every pass. The turns are kept on the probe (`looked_at`); a probe
without them looks at every device every pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any


def devices_to_look_at(
    probe: Any, live: Sequence[str], most: int, now: datetime
) -> list[str] | None:
    """The live devices this pass looks at (their turns noted on `probe`), or None for all."""
    looked_at: dict[str, datetime] | None = getattr(probe, "looked_at", None)
    if looked_at is None or len(live) <= most:
        return None
    for gone in looked_at.keys() - set(live):
        del looked_at[gone]
    chosen = sorted(live, key=lambda key: (key in looked_at, looked_at.get(key, now), key))
    chosen = chosen[:most]
    for key in chosen:
        looked_at[key] = now
    return chosen
