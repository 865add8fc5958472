"""Whose fault a failed result is: the device's (evidence for the list) or the farm's.

A failed result's `error` begins with the name of the error that ended its job (the
executor writes `"<class>: <message>"`). Only these are the device's, with the model:

- `ToolOutputError`: the tool crashed or gave no result on a phone that stayed online;
- `ModelError`: the delegate refused or failed the model on that device.

Nothing else is ever evidence against a device: a timeout (`timed_out` results, an old
`ToolTimeout`: a loaded host or a slow transport as much as the phone), a lost phone, adb
or a push (`DeviceError`: retried by the farm, which writes no result for it, but older
results hold them), a bad job (`JobError`), the worker's memory limit (`MemoryError`),
our own bugs (`bug: ...`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_

from farm_core.schema import FAILED, Result

#: Errors (class names) that mean the device, with the model, failed the job.
DEVICE_CAUSED_ERRORS = ("ToolOutputError", "ModelError")


def device_caused() -> Any:
    """SQL: the result failed, and by the device's fault."""
    return and_(
        Result.outcome == FAILED,
        or_(*(Result.error.startswith(f"{name}: ") for name in DEVICE_CAUSED_ERRORS)),
    )
