"""Open a session for a tool: the CPU interpreter (with an op hook) or the GPU delegate."""

from __future__ import annotations

from typing import IO, Any

from ..graph import Model
from ..session import make_session
from .session_info import accepted_kwargs


def gpu_options(
    model: Model,
    enable_quant: bool = True,
    max_delegated_partitions: int = 1,
    serialize_dir: str | None = None,
    serialize_token: str | None = None,
    require_full_delegation: bool = False,
) -> dict[str, Any]:
    """TfLiteGpuDelegateOptionsV2-named options; the token defaults to the model's sha256.
    `require_full_delegation` (benchmark_model's flag) puts every partition the GPU takes
    on it, however small (gpu/placement.py)."""
    opts: dict[str, Any] = {
        "enable_quant": enable_quant,
        "max_delegated_partitions": max_delegated_partitions,
    }
    if require_full_delegation:
        opts["min_gpu_work"] = 0
    if serialize_dir:
        opts["serialization_dir"] = serialize_dir
        opts["model_token"] = serialize_token or model.sha256
    return opts


def open_session(
    model: Model,
    delegate: str,
    precision: str = "fp32",
    device: str | None = None,
    log: IO[str] | None = None,
    notes: list[str] | None = None,
    **options: Any,
) -> Any:
    """A session of `model` on `delegate` ("cpu" or "gpu").

    GPU options the delegate does not take are left out and named in `notes`.
    """
    if delegate != "cpu":
        try:
            from ..gpu.delegate import GpuSession
        except ImportError:
            GpuSession = None  # make_session raises the clear error
        if GpuSession is not None:
            options, dropped = accepted_kwargs(GpuSession, options)
            if notes is not None and dropped:
                notes.append(f"the GPU delegate ignores options: {', '.join(dropped)}")
    return make_session(model, delegate, precision=precision, device=device, log=log, **options)
