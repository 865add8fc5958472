"""A line every few seconds while something slow runs in this thread, so that whoever
watches (a terminal, `devicefarm run`) never sits more than 10 s in silence: a canary on
a cold PoCL kernel cache compiles for minutes."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

#: Seconds between the lines (under the 10 s a user may wait without one).
EVERY_S = 8.0


@contextlib.contextmanager
def ticking(say: Callable[[str], None], what: str, every_s: float = EVERY_S) -> Iterator[None]:
    """Say `{what}: N s` every `every_s` until the block ends."""
    stop = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not stop.wait(every_s):
            say(f"{what}: {time.monotonic() - start:.0f} s")

    thread = threading.Thread(target=tick, name=f"ticking {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
