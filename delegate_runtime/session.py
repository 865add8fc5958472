"""One entry point that runs a model on a chosen delegate (cpu reference or OpenCL GPU)."""

from __future__ import annotations

from typing import IO, Any, Protocol

import numpy as np

from .errors import JobError
from .graph import Model

DELEGATES = ("cpu", "gpu")


class Session(Protocol):
    """What every delegate offers to the tools: run inputs, get outputs."""

    def invoke(self, inputs: list[np.ndarray], subgraph: int = 0) -> list[np.ndarray]: ...


def make_session(
    model: Model,
    delegate: str = "cpu",
    precision: str = "fp32",
    device: str | None = None,
    log: IO[str] | None = None,
    **gpu_options: Any,
) -> Session:
    """A runnable session of `model` on `delegate` ("cpu" or "gpu")."""
    if delegate == "cpu":
        from .interpreter import Interpreter

        return Interpreter(model, precision=precision)
    if delegate == "gpu":
        try:
            from .gpu.delegate import GpuSession
        except ImportError as exc:
            raise JobError(f"the GPU delegate is not available: {exc}") from exc
        return GpuSession(model, precision=precision, device=device, log=log, **gpu_options)
    raise JobError(f"delegate {delegate!r} is not one of {', '.join(DELEGATES)}")
