"""Run untrusted models in a child process under a memory limit and a time limit, and
say how each run ended.

One child serves many models in turn (its start-up, PoCL's included, is paid once); a
child that dies or stops answering is recorded and replaced. Acceptable endings are a
result or an error that says what is wrong (ModelError, JobError, JobTimeout at the
deadline, DeviceError); a traceback of any other exception, a raw MemoryError, a killed
child and a hang are failures.
"""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import resource
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Address-space limit of the child (RLIMIT_AS), bytes.
MEMORY_LIMIT_BYTES = 2 << 30
#: Time limit of one invoke: the interpreter's deadline, seconds.
DEADLINE_S = 3.0
#: A child silent this long past the deadline counts as hung, seconds.
HANG_GRACE_S = 20.0
#: A new child must be ready (its imports done) within this long, seconds: start-up is
#: not the model's time, and a loaded machine takes a while to import numpy and PoCL.
START_WAIT_S = 120.0
#: Endings that say clearly what went wrong (or that nothing did).
CLEAR = frozenset(("ok", "not_invoked", "model_error", "job_error", "timed_out", "device_error"))
#: Inputs bigger than this (elements, all inputs together) are not made: the model is read
#: and set up only (making them is the harness's allocation, not the runtime's).
MAX_INPUT_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Outcome:
    kind: str  #: one of CLEAR, or traceback, memory_error, killed, hang
    message: str = ""
    max_rss_kib: int = 0  #: the child's peak resident set so far
    outputs: tuple[np.ndarray, ...] = ()  #: the model's outputs, when it ran

    @property
    def clear(self) -> bool:
        return self.kind in CLEAR


def _inputs_for(model: object) -> list[np.ndarray] | None:
    """Ones of each main input's declared shape and type; None when they are too big."""
    tensors = [model.main.tensors[t] for t in model.main.inputs]  # type: ignore[attr-defined]
    if sum(t.size for t in tensors) > MAX_INPUT_ELEMENTS:
        return None
    return [np.ones(t.shape, t.dtype) for t in tensors]


def _run_one(
    backend: str, data: bytes, feeds: list[np.ndarray] | None, deadline_s: float
) -> tuple[str, str, tuple[np.ndarray, ...]]:
    from delegate_runtime import read_model
    from delegate_runtime.errors import DeviceError, JobError, JobTimeout, ModelError
    from delegate_runtime.session import make_session

    try:
        model = read_model(data)
        session = make_session(model, backend, log=_Discard())
        interpreter = getattr(session, "cpu", session)  # the GPU session's CPU fallback
        if feeds is None:
            feeds = _inputs_for(model)
            if feeds is None:
                return "not_invoked", "inputs over the harness's size", ()
        interpreter.deadline = time.monotonic() + deadline_s
        outputs = session.invoke(feeds)
        small = sum(o.size for o in outputs) <= MAX_INPUT_ELEMENTS
        return "ok", "", tuple(outputs) if small else ()
    except ModelError as exc:
        return "model_error", str(exc), ()
    except JobTimeout as exc:
        return "timed_out", str(exc), ()
    except JobError as exc:
        return "job_error", str(exc), ()
    except DeviceError as exc:
        return "device_error", str(exc), ()
    except MemoryError:
        return "memory_error", traceback.format_exc(), ()
    except Exception:
        return "traceback", traceback.format_exc(), ()


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _serve(conn: mp.connection.Connection, memory_limit: int) -> None:
    faulthandler.enable()  # a native crash prints the Python stack of the model it ran
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    import delegate_runtime.session  # noqa: F401 - imports before the clock starts

    conn.send("ready")
    while True:
        job = conn.recv()
        if job is None:
            return
        kind, message, outputs = _run_one(*job)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        conn.send((kind, message[-4000:], rss, outputs))


class Sandbox:
    """A child process that runs models one at a time; `run` never raises for a model."""

    def __init__(self, memory_limit: int = MEMORY_LIMIT_BYTES, deadline_s: float = DEADLINE_S):
        self.memory_limit = memory_limit
        self.deadline_s = deadline_s
        self._ctx = mp.get_context("spawn")  # no inherited OpenCL state or threads
        self._proc: mp.process.BaseProcess | None = None
        self._conn: mp.connection.Connection | None = None
        self.max_rss_kib = 0

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, self.memory_limit))
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(START_WAIT_S) or parent.recv() != "ready":
            self._stop()
            raise RuntimeError(f"the sandbox child was not ready within {START_WAIT_S:g} s")

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
        self._proc = self._conn = None

    def run(self, backend: str, data: bytes, feeds: Sequence[np.ndarray] | None = None) -> Outcome:
        """Read, set up and invoke `data` on `backend` ("cpu" or "gpu") in the child."""
        if self._proc is None:
            self._start()
        assert self._conn is not None and self._proc is not None
        self._conn.send((backend, data, None if feeds is None else list(feeds), self.deadline_s))
        wait_s = self.deadline_s + HANG_GRACE_S
        if not self._conn.poll(wait_s):
            self._stop()
            return Outcome("hang", f"no answer {wait_s:.0f} s after start")
        try:
            kind, message, rss, outputs = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join()
            code = self._proc.exitcode
            self._stop()
            return Outcome("killed", f"the child died (exit code {code})")
        self.max_rss_kib = max(self.max_rss_kib, rss)
        return Outcome(kind, message, rss, outputs)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(None)
                self._proc.join(10)
            except OSError:
                pass  # the child is gone already
        self._stop()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
