"""When each token was last used: kept in memory by the process that checks tokens, and
written beside the tokens file (`tokens.json.used`, {token id: ISO time}) within FLUSH_S
of a use, never into the tokens file itself (which only `devicefarm api token` rewrites).

Several processes (the API, the dashboard) may write it: each write merges what the file
holds and keeps the later time of each token. A process killed loses its last FLUSH_S.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from .accounts import write_private

log = logging.getLogger(__name__)

#: The most seconds a token's use waits in memory before it is written.
FLUSH_S = 60.0
SUFFIX = ".used"


def uses_path(tokens_path: str | Path) -> Path:
    """The last-use file of a tokens file: `tokens.json.used` beside `tokens.json`."""
    path = Path(tokens_path)
    return path.with_name(path.name + SUFFIX)


def load_uses(tokens_path: str | Path) -> dict[str, datetime]:
    """Each token id's last use as written (none when the file is missing or unreadable)."""
    try:
        data = json.loads(uses_path(tokens_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for token_id, text in data.items() if isinstance(data, dict) else ():
        try:
            out[str(token_id)] = datetime.fromisoformat(text)
        except (TypeError, ValueError):
            continue
    return out


class UseLog:
    """Token uses in memory, written `flush_s` after the first use not yet written (by a
    daemon timer), and by `flush`."""

    def __init__(self, tokens_path: str | Path, flush_s: float = FLUSH_S):
        self.tokens_path = Path(tokens_path)
        self.flush_s = flush_s
        self._pending: dict[str, datetime] = {}
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def used(self, token_id: str, at: datetime) -> None:
        """Note a use of `token_id` at `at` (UTC); it is written within `flush_s`."""
        at = at.replace(microsecond=0)
        with self._lock:
            if at > self._pending.get(token_id, at.min):
                self._pending[token_id] = at
            if self._timer is None:
                self._timer = threading.Timer(self.flush_s, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Merge the uses noted into the file (the later time of each token wins)."""
        with self._lock:
            self._timer = None
            pending, self._pending = self._pending, {}
            if not pending:
                return
            try:
                with _locked(uses_path(self.tokens_path)):
                    merged = load_uses(self.tokens_path)
                    for token_id, at in pending.items():
                        merged[token_id] = max(at, merged.get(token_id, at))
                    text = json.dumps({k: v.isoformat() for k, v in sorted(merged.items())})
                    write_private(uses_path(self.tokens_path), text + "\n")
            except OSError as exc:  # an observer: a full disk must not refuse requests
                log.warning("cannot write %s: %s", uses_path(self.tokens_path), exc)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path`.lock (processes merging the same file take turns)."""
    import fcntl

    with open(path.with_name(path.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
