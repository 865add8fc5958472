"""Which job endings are the device's fault, and its failure streak after each
(farm_core/failure_streaks.py keeps the streak and quarantines).

The device's fault: a DeviceError (the job moved: already an attempt `device_error`), a
time limit, or a tool that crashed or printed no result on a device that stayed online
(ToolOutputError) for a model the CPU reference accepts. A model the reference refuses as
well fails the same way everywhere: the model's fault. Every other failure (the model's,
the job's, a bug) is none of the device's.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from delegate_runtime.errors import ModelError
from farm_core import failure_streaks
from farm_core.schema import TIMED_OUT, utcnow

if TYPE_CHECKING:
    from farm_core.jobs import Claimed

    from .consumer import ConsumerContext

log = logging.getLogger(__name__)


def device_fault(ctx: ConsumerContext, state: str, exc: BaseException | None, sha256: str) -> bool:
    """Whether a job that ended in `state` on `exc` failed for its device's reasons."""
    if state == TIMED_OUT:
        return True
    if not isinstance(exc, ModelError):
        return False
    from .android.runner import ToolOutputError

    return isinstance(exc, ToolOutputError) and not reference_refuses(ctx, sha256)


def reference_refuses(ctx: ConsumerContext, sha256: str) -> str:
    """Why the CPU reference refuses the model (reads it and looks up every op's kernel,
    runs nothing); "" when it accepts it."""
    from .executor import model_path

    return _refusal(str(model_path(ctx, sha256)))


@functools.lru_cache(maxsize=64)
def _refusal(path: str) -> str:  # a model file's name is its sha256: the answer never changes
    from pathlib import Path

    from delegate_runtime import read_model
    from delegate_runtime.interpreter import check_supported

    try:
        check_supported(read_model(Path(path).read_bytes()))
    except Exception as exc:  # noqa: BLE001 - any refusal, even a reader's bug, is the model's
        return f"{type(exc).__name__}: {exc}"
    return ""


def after_failure(
    ctx: ConsumerContext, job: Claimed, state: str, exc: BaseException, why: str
) -> None:
    """Count a job that ended in `state` on `exc` against its device when that was the
    device's fault."""

    def step() -> str:
        if not device_fault(ctx, state, exc, job.model_sha256):
            return ""
        with ctx.engine.begin() as conn:
            return failure_streaks.record_failure(
                conn, ctx.device.key, job.job_id, job.attempt, ctx.worker, why, utcnow()
            )

    _check(ctx, step)


def after_device_error(ctx: ConsumerContext) -> None:
    """The streak after a DeviceError moved a job (its attempt is already recorded)."""

    def step() -> str:
        with ctx.engine.begin() as conn:
            return failure_streaks.check(conn, ctx.device.key)

    if not ctx.quarantined:  # else its canary quarantined it already
        _check(ctx, step)


def _check(ctx: ConsumerContext, step: Callable[[], str]) -> None:
    try:
        why = step()
    except Exception as exc:  # noqa: BLE001 - the job is done; never fail it for this
        log.warning("%s: failure streak not updated (%s)", ctx.device.key, str(exc)[:200])
        return
    if why:  # this consumer claims no more: its agent stops it and retries the canary
        ctx.quarantined = True
        log.warning("%s quarantined: %s", ctx.device.key, why)
