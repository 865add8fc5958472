"""Back-off for wrong dashboard passwords, keyed by source and by account.

A source (an IP address) has `free_attempts` wrong passwords; after that it must wait
`base_delay_s * 2**(n - free_attempts)` seconds (capped at `max_delay_s`) after its n-th.
An account has `account_free` wrong passwords from all sources together; after that the
same back-off holds for guesses at it from every source that has itself failed, so many
addresses guessing at one account each get one guess before they are slowed as well.
A source that has not failed is never held back: the right password from it always gets in,
and no one can lock a user out from elsewhere (issue 42: 8 addresses x 3 wrong passwords
used to make everyone wait, the right password from a ninth address included).

The dashboard's login has a single field (a token or the shared password), so a wrong guess
names no account: it counts against ANY_SECRET, the one account a guess can find (a token
is too long to guess; the shared password is not). Failures are forgotten after `window_s`;
a right password clears its source's. While a source must wait, no password is checked at
all, the right one included. Sources and accounts remembered are bounded (least recently
failed forgotten first), and so are the failures remembered of each.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

#: Overrides `base_delay_s` (seconds), e.g. for tests.
ENV_DELAY = "DEVICEFARM_DASHBOARD_LOGIN_DELAY_S"
#: Most sources remembered; the least recently failed are forgotten first.
MAX_CLIENTS = 10_000
#: Most accounts remembered; the least recently failed are forgotten first.
MAX_ACCOUNTS = 10_000
#: Doublings of the delay counted at most: 2**40 s is past any cap (so failures past the
#: free ones plus this many are not remembered either).
MAX_DOUBLINGS = 40
#: The account of a guess that names none: the login's one secret field.
ANY_SECRET = "*"


@dataclass
class LoginThrottle:
    free_attempts: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 300.0
    account_free: int = 20
    window_s: float = 900.0
    clock: Callable[[], float] = time.monotonic
    _clients: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict, repr=False)
    _accounts: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict, repr=False)
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

    def wait_s(self, client: str, account: str = ANY_SECRET) -> float:
        """Seconds `client` must still wait before its next attempt at `account` (0: it
        may try now; always 0 for a client with no recent failure)."""
        with self._lock:
            now = self.clock()
            own = self._recent(self._clients, client, now)
            if not own:
                return 0.0
            theirs = self._recent(self._accounts, account, now)
            return max(
                self._left(own, self.free_attempts, now),
                self._left(theirs, self.account_free, now),
            )

    def failed(self, client: str, account: str = ANY_SECRET) -> None:
        """Record a wrong password from `client` at `account`."""
        with self._lock:
            now = self.clock()
            self._add(self._clients, client, now, MAX_CLIENTS)
            self._add(self._accounts, account, now, MAX_ACCOUNTS)

    def succeeded(self, client: str, account: str = ANY_SECRET) -> None:
        """A right password: `client`'s failures are forgotten (`account`'s stay: they may
        be someone else's guesses)."""
        with self._lock:
            self._clients.pop(client, None)

    def _recent(self, table: OrderedDict[str, deque[float]], key: str, now: float) -> deque[float]:
        failures = table.get(key)
        if failures is None:
            return deque()
        while failures and failures[0] < now - self.window_s:
            failures.popleft()
        if not failures:
            del table[key]
        return failures

    def _add(self, table: OrderedDict[str, deque[float]], key: str, now: float, most: int) -> None:
        self._recent(table, key, now)
        most_failures = max(self.free_attempts, self.account_free) + MAX_DOUBLINGS + 1
        table.setdefault(key, deque(maxlen=most_failures)).append(now)
        table.move_to_end(key)
        while len(table) > most:
            table.popitem(last=False)

    def _left(self, failures: deque[float], free: int, now: float) -> float:
        if len(failures) < free:
            return 0.0
        doublings = min(len(failures) - free, MAX_DOUBLINGS)
        delay = min(self.base_delay_s * 2**doublings, self.max_delay_s)
        return max(0.0, failures[-1] + delay - now)


_shared: LoginThrottle | None = None
_shared_lock = threading.Lock()


def shared() -> LoginThrottle:
    """The process's one throttle: the login page and every session share it."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LoginThrottle.from_env()
        return _shared
