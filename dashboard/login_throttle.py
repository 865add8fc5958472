"""Back-off for wrong dashboard passwords: per client, and for everyone at once.

A client (an IP address) has `free_attempts` wrong passwords; after that each attempt must
wait `base_delay_s * 2**(n - free_attempts)` seconds (capped at `max_delay_s`) after its
n-th failure. Failures from every client together have `global_free` attempts before the
same back-off applies to all, so many addresses guessing at once are slowed as well.
Failures are forgotten after `window_s`; a right password clears its client's.
While a client must wait, no password is checked at all, the right one included.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

#: Overrides `base_delay_s` (seconds), e.g. for tests.
ENV_DELAY = "DEVICEFARM_DASHBOARD_LOGIN_DELAY_S"
#: Most clients remembered; the oldest are forgotten first (the global back-off still holds).
MAX_CLIENTS = 10_000


@dataclass
class LoginThrottle:
    free_attempts: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 300.0
    global_free: int = 20
    window_s: float = 900.0
    clock: Callable[[], float] = time.monotonic
    _clients: dict[str, deque[float]] = field(default_factory=dict, repr=False)
    _all: deque[float] = field(default_factory=deque, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_env(cls) -> LoginThrottle:
        """Defaults, with `base_delay_s` from DEVICEFARM_DASHBOARD_LOGIN_DELAY_S when it is a
        number of seconds in [0, max_delay_s]."""
        try:
            delay = float(os.environ.get(ENV_DELAY, "").strip() or "nan")
        except ValueError:
            delay = float("nan")
        return cls(base_delay_s=delay) if 0 <= delay <= cls.max_delay_s else cls()

    def wait_s(self, client: str) -> float:
        """Seconds `client` must still wait before its next attempt (0: it may try now)."""
        with self._lock:
            now = self.clock()
            self._forget(now)
            own = self._clients.get(client, deque())
            return max(
                self._left(own, self.free_attempts, now),
                self._left(self._all, self.global_free, now),
            )

    def failed(self, client: str) -> None:
        """Record a wrong password from `client`."""
        with self._lock:
            now = self.clock()
            self._forget(now)
            self._clients.setdefault(client, deque()).append(now)
            self._all.append(now)
            while len(self._clients) > MAX_CLIENTS:
                del self._clients[next(iter(self._clients))]

    def succeeded(self, client: str) -> None:
        """A right password: `client`'s failures are forgotten."""
        with self._lock:
            self._clients.pop(client, None)

    def _left(self, failures: deque[float], free: int, now: float) -> float:
        if len(failures) < free:
            return 0.0
        doublings = min(len(failures) - free, 40)  # 2**40 s is past any cap
        delay = min(self.base_delay_s * 2**doublings, self.max_delay_s)
        return max(0.0, failures[-1] + delay - now)

    def _forget(self, now: float) -> None:
        horizon = now - self.window_s
        while self._all and self._all[0] < horizon:
            self._all.popleft()
        for key, failures in list(self._clients.items()):
            while failures and failures[0] < horizon:
                failures.popleft()
            if not failures:
                del self._clients[key]


_shared: LoginThrottle | None = None
_shared_lock = threading.Lock()


def shared() -> LoginThrottle:
    """The process's one throttle: the login page and every session share it."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LoginThrottle.from_env()
        return _shared
