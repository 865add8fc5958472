"""A reconciler pass's time for bulk work.

A fault can hand one pass thousands of jobs: a host's 100 devices lost with 800 dispatched
jobs, moved off, their queued ones relocated, then 1,400 messages sent. Under a fleet's
full load (10 agents, PostgreSQL and Redis on 2 cores) those steps took 0.65, 0.46 and
2.07 s in one 3.6 s pass (issue 44's target: 1 s), and nothing else was reconciled
meanwhile. A pass now begins its bulk steps only while its budget lasts: relocation and
jobs home whole, as one step each, since most of a step's time is what it reads once for
all its jobs; the jobs off lost devices in parts of a transaction each, what placing needs
read once for all of them (read again per part, a 200-job part had taken 0.4-1.0 s under
that load; now 0.23-0.43 s, the first with the reads); lease expiries, a transaction per
job, in parts; the fill a part of the live devices at a time. What a pass
leaves is the next pass's, which the loops start at once where jobs are left to move
(`ReconcileReport.deferred`, `moves_left`). Every step is a compare-and-set on what it
reads, so work left over is simply found again.

Progress is never starved: the first move step with work runs in every pass, spent budget
or not, and the fill's first part runs in every pass in which no move ran (a pass that
moved leaves the fill to the next; agents fill their own devices' queues as jobs end).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from farm_core.pair_chunks import chunks

T = TypeVar("T")


class PassBudget:
    """Until when a pass begins bulk work, and what it left for the next pass."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._until = clock() + seconds
        self._moved = False  #: a move ran this pass
        #: items left for the next pass, by step
        self.deferred: dict[str, int] = {}

    def spent(self) -> bool:
        return self._clock() >= self._until

    def begins(self, step: str, count: int) -> bool:
        """Whether a move step of `count` jobs runs now: while the budget lasts, or as the
        pass's first move; else its jobs are counted as left."""
        if not count:
            return False
        if self._moved and self.spent():
            self._defer(step, count)
            return False
        self._moved = True
        return True

    def move_parts(self, step: str, items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
        """`items` (jobs moved a transaction each) in parts of `size` while the budget
        lasts; the first part in any case where it is the pass's first move."""
        for n, part in enumerate(chunks(items, size)):
            if not self.begins(step, len(part)):
                self._defer(step, len(items) - n * size - len(part))
                return
            yield part

    def fill_parts(self, items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
        """`items` (devices) in parts of `size` while the budget lasts, a part beginning
        only where the one before it would end within it; the first in any case where no
        move ran this pass."""
        took = 0.0  #: the last part's seconds
        for n, part in enumerate(chunks(items, size)):
            if self._clock() + took >= self._until and (n or self._moved):
                self._defer("fill", len(items) - n * size)
                return
            started = self._clock()
            yield part
            took = self._clock() - started

    def _defer(self, step: str, count: int) -> None:
        if count:
            self.deferred[step] = self.deferred.get(step, 0) + count
