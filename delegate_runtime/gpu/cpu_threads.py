"""How many threads LiteRT's CPU runtime gets for a small run: measured, not assumed.

XNNPACK spreads an op over its thread pool and wakes every thread for it; on a run of a
few hundred thousand multiply-adds the wake-ups can cost more than the arithmetic
(openWakeWord's melspectrogram on 2 cores: 41 us on one thread, 45 on two, 227 on 16),
and on others one thread is slower (its wake-word heads: 8.0 us against 5.5 on two). So
a small run is timed on each candidate before the session's first invoke, on zeros, and
keeps the fastest: 45-70 ms at init, for a run that small.

Only where the pool is large (the switches' cpu_thread_trial_min_pool): on 2 cores the two-thread pool's speed
moved from block to block by 2x (below), so the trial picked one thread on some sessions
and two on others of the same model (hey_mycroft 11 us in one session, 7 in the next,
LiteRT 6), where two threads, LiteRT's own choice, are the better bet; a wake-up costs
more the more threads it wakes (LiteRT's CPU at 16 threads took 16 us for alexa on an
H200's host, 5.5 at 2 threads here).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Each candidate first runs back-to-back for WARM_S, then blocks of TIMED back-to-back
#: invokes, as a benchmark loop runs them; the best block's median counts. On 2 cores a new
#: interpreter on two threads ran melspectrogram in 44-48 us for its first ~300 invokes
#: (~15 ms), then in 30 (one thread: 41-42 throughout), and alexa_v0.1 in 5.7-13 us from
#: block to block (one thread: 8.8-9.3); alternating single invokes between candidates
#: let a pool's threads sleep, and made two threads look slower than one where they were
#: faster.
WARM_S, TIMED, BLOCKS = 0.02, 40, 3


def fastest(interpreters: Sequence[Any], threads: Sequence[int]) -> tuple[Any, int]:
    """The interpreter (and its threads) of `interpreters` whose best block's median
    invoke was the shortest; the first where there is one."""
    if len(interpreters) == 1:
        return interpreters[0], threads[0]
    runs = [_runner(it) for it in interpreters]
    for run in runs:
        until = time.perf_counter() + WARM_S
        while time.perf_counter() < until:
            run()
    best_ns = [float("inf")] * len(runs)
    for _ in range(BLOCKS):
        for i, run in enumerate(runs):
            times = []
            for _ in range(TIMED):
                start = time.perf_counter_ns()
                run()
                times.append(time.perf_counter_ns() - start)
            best_ns[i] = min(best_ns[i], statistics.median(times))
    best = min(range(len(runs)), key=best_ns.__getitem__)
    return interpreters[best], threads[best]


def _runner(it: Any) -> Any:
    """One invoke of `it` on zeros, its outputs read back, as a session runs it."""
    feeds = [(d["index"], np.zeros(d["shape"], d["dtype"])) for d in it.get_input_details()]
    outs = [d["index"] for d in it.get_output_details()]

    def run() -> None:
        for index, x in feeds:
            it.set_tensor(index, x)
        it.invoke()
        for index in outs:
            it.get_tensor(index)

    return run
