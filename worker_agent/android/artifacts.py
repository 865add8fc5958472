"""Debug artifacts around a phone's tool run, as AWS Device Farm and Firebase Test Lab keep
them: the run's logcat, new tombstones and the crash's signal, the conditions (thermal
zones, CPU and GPU clocks) before and after, and the tool's output when no result keeps it.

    with artifacts.captured(runner, spec):   # AdbRunner.run wraps its tool runs in this
        ...

Before: `logcat -c` (the default buffers: main, system, crash), the names of the
tombstones already there, a reading. After (whatever happened): `logcat -d -v threadtime`
(its last LOGCAT_LINES lines), the tombstones that are new or rewritten (pulled when the
shell user may read them; otherwise debuggerd's copy under DEBUG in the crash buffer), the
signal, a second reading. An observer: a capture that fails is a note among the
artifacts, never the job's error, and the job's own exception goes on unchanged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from delegate_runtime.errors import DevicefarmError
from farm_core.artifacts import JSON_MEDIA, TOOL_OUTPUT, NewArtifact

from . import adb, conditions
from .sync import SyncFailed, SyncSession

log = logging.getLogger(__name__)

TOMBSTONE_DIR = "/data/tombstones"
#: The most recent logcat lines kept of a run (logcat's own -t bound, on the phone).
LOGCAT_LINES = int(os.environ.get("DEVICEFARM_ANDROID_LOGCAT_LINES", "20000"))
#: The most bytes read from `logcat -d` (beyond: the dump is a note, not the host's memory).
LOGCAT_MAX_BYTES = 32 << 20
#: A tombstone larger than this is listed, not pulled (bytes).
TOMBSTONE_MAX_BYTES = 16 << 20
#: Seconds for logcat's clear and dump.
LOGCAT_TIMEOUT_S = 30.0
#: The tombstone's signal line, and libc's line in the crash buffer.
_SIGNAL = re.compile(
    r"^signal (\d+) \((SIG\w+)\), code (-?\d+) \((\w+)\)(?:, fault addr (\S+))?", re.M
)
_FATAL = re.compile(
    r"Fatal signal (\d+) \((SIG\w+)\), code (-?\d+) \((\w+)\)(?:, fault addr (\S+))?"
)
#: A threadtime line of debuggerd's DEBUG tag: its message.
_DEBUG_LINE = re.compile(r"^\S+ \S+ +\d+ +\d+ F DEBUG   : ?(.*)$")

Store = Callable[[int, int, list[NewArtifact]], None]


@dataclass
class Capture:
    """One capture on one phone: `start()` before the tool runs, `finish(error)` after."""

    client: Any
    serial: str
    sync: Callable[[], SyncSession]
    zone_types: dict[str, str] = field(default_factory=dict)
    before: dict[str, Any] = field(default_factory=dict)
    known: dict[str, tuple[int, int]] = field(default_factory=dict)  #: name -> (mtime, size)
    notes: list[str] = field(default_factory=list)

    def _note(self, what: str, exc: BaseException) -> None:
        self.notes.append(f"{what}: {type(exc).__name__}: {exc}")

    def _tombstones(self) -> dict[str, tuple[int, int]]:
        with self.sync() as s:
            return {e.name: (e.mtime, e.size) for e in s.list(TOMBSTONE_DIR) if not e.is_dir}

    def start(self) -> None:
        try:
            adb.shell(self.client, self.serial, "logcat -c", LOGCAT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - an observer never fails the job
            self._note("logcat -c", exc)
        try:
            self.known = self._tombstones()
            with self.sync() as s:
                self.before = conditions.read(s, self.zone_types)
        except Exception as exc:  # noqa: BLE001
            self._note("before the run", exc)

    def finish(self, error: BaseException | None) -> list[NewArtifact]:
        """The artifacts of the run that just ended (with `error`, when it raised)."""
        out: list[NewArtifact] = []
        logcat = self._logcat(out)
        pulled = self._new_tombstones(out)
        crash = crash_of([a.data.decode("utf-8", "replace") for a in pulled], logcat)
        if pulled == [] and crash and (text := debug_block(logcat)):
            out.append(NewArtifact("tombstone", "tombstone_from_logcat.txt", text.encode(),
                                   note="debuggerd's copy in logcat's crash buffer (the "
                                   "shell user cannot read /data/tombstones)"))  # fmt: skip
        if crash:
            out.append(_json("crash", "crash.json", crash))
        out.append(_json("conditions", "conditions.json", {"before": self.before,
                                                          "after": self._after()}))  # fmt: skip
        log_text = getattr(error, "log", "")
        if log_text and isinstance(error, DevicefarmError) and error.retryable:
            # no result keeps a retried attempt's output: this is its only copy
            out.append(NewArtifact("tool_output", TOOL_OUTPUT, str(log_text).encode(), keep="tail"))
        if self.notes:
            out.append(NewArtifact("capture", "capture_notes.txt", "\n".join(self.notes).encode()))
        return out

    def _logcat(self, out: list[NewArtifact]) -> str:
        line = f"logcat -d -v threadtime -t {LOGCAT_LINES}"
        try:
            raw, late = adb.shell(
                self.client, self.serial, line, LOGCAT_TIMEOUT_S, LOGCAT_MAX_BYTES
            )
        except Exception as exc:  # noqa: BLE001
            self._note(line, exc)
            return ""
        if late:
            self.notes.append(f"{line}: cut at its {LOGCAT_TIMEOUT_S:g} s deadline")
        out.append(NewArtifact("logcat", "logcat.txt", raw, note=f"`{line}`", keep="tail"))
        return raw.decode("utf-8", "replace")

    def _new_tombstones(self, out: list[NewArtifact]) -> list[NewArtifact]:
        try:
            now = self._tombstones()
        except Exception as exc:  # noqa: BLE001
            self._note(f"listing {TOMBSTONE_DIR}", exc)
            return []
        pulled = []
        for name, (mtime, size) in sorted(now.items()):
            if self.known.get(name) == (mtime, size):
                continue
            if size > TOMBSTONE_MAX_BYTES:
                self.notes.append(f"{TOMBSTONE_DIR}/{name}: {size} bytes, not pulled")
                continue
            try:
                with self.sync() as s:
                    data = s.recv(f"{TOMBSTONE_DIR}/{name}")
            except (SyncFailed, DevicefarmError, *adb.adb_errors()) as exc:
                self._note(f"pulling {TOMBSTONE_DIR}/{name}", exc)
                continue
            item = NewArtifact("tombstone", name, data, note=f"{TOMBSTONE_DIR}/{name}")
            pulled.append(item)
            out.append(item)
        return pulled

    def _after(self) -> dict[str, Any]:
        try:
            with self.sync() as s:
                return conditions.read(s, self.zone_types)
        except Exception as exc:  # noqa: BLE001
            return {"at": time.time(), "error": f"{type(exc).__name__}: {exc}"}


def _json(kind: str, name: str, value: Any) -> NewArtifact:
    data = json.dumps(value, indent=2, sort_keys=True, default=str).encode()
    return NewArtifact(kind, name, data, JSON_MEDIA)


def crash_of(tombstones: list[str], logcat: str) -> dict[str, Any] | None:
    """The crash's signal: from the first tombstone's signal line, else libc's `Fatal
    signal` line in logcat; None when the run left neither."""
    for text in tombstones:
        if m := _SIGNAL.search(text):
            return _signal(m, "tombstone")
    if m := _FATAL.search(logcat):
        return _signal(m, "logcat")
    return None


def _signal(m: re.Match[str], source: str) -> dict[str, Any]:
    number, name, code, code_name, addr = m.groups()
    return {"signal": name, "number": int(number), "code": int(code), "code_name": code_name,
            "fault_addr": addr, "source": source}  # fmt: skip


def debug_block(logcat: str) -> str:
    """debuggerd's tombstone as its DEBUG lines in a threadtime dump carry it."""
    lines = [m.group(1) for line in logcat.splitlines() if (m := _DEBUG_LINE.match(line))]
    return "\n".join(lines) + "\n" if lines else ""


def store_in_job_db() -> Store | None:
    """Where a worker's consumer keeps artifacts: its database (None outside a consumer)."""
    from .. import consumer

    try:
        engine = consumer.current_context().engine
    except RuntimeError:
        return None
    return db_store(engine)


def db_store(engine: Any) -> Store:
    """A store that saves an attempt's artifacts in `engine`'s database."""
    from farm_core import artifacts as stored

    def save(job_id: int, attempt: int, items: list[NewArtifact]) -> None:
        with engine.begin() as conn:
            stored.save(conn, job_id, attempt, items)

    return save


@contextlib.contextmanager
def captured(runner: Any, spec: Any, store: Store | None = None) -> Iterator[Capture]:
    """Capture around the body: an AdbRunner and the JobSpec it runs; the artifacts go to
    `store` (default: the consumer's database), and the body's exception goes on."""
    cap = Capture(runner.client, runner.serial, runner.sync, getattr(runner, "_zone_types", {}))
    cap.start()
    error: BaseException | None = None
    try:
        yield cap
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            items = cap.finish(error)
            save = store or store_in_job_db()
            if save is not None:
                save(spec.job_id, spec.attempt, items)
        except Exception as exc:  # noqa: BLE001 - the job's outcome is not the capture's
            log.warning("job %s: artifacts not stored: %s", spec.job_id, exc)
