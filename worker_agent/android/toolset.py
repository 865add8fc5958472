"""The official TFLite tools for each ABI, on the lab host.

`DEVICEFARM_ANDROID_TOOLS` names a folder with one sub-folder per ABI:

    $DEVICEFARM_ANDROID_TOOLS/arm64-v8a/benchmark_model
    $DEVICEFARM_ANDROID_TOOLS/arm64-v8a/run_eval        # inference_diff (optional)
    $DEVICEFARM_ANDROID_TOOLS/armeabi-v7a/benchmark_model

A phone gets the first ABI of its `ro.product.cpu.abilist` that has a benchmark_model.
Only the ABIs Android defines (facts.KNOWN_ABIS) name a folder: what a phone lists is never
used as a path (`../../tmp/x` would run a host file of the phone's choosing).
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from delegate_runtime.errors import DeviceError

from .facts import KNOWN_ABIS, clean

ENV_TOOLS = "DEVICEFARM_ANDROID_TOOLS"
BENCHMARK_MODEL = "benchmark_model"
RUN_EVAL = "run_eval"


@dataclass(frozen=True)
class Tool:
    name: str
    path: Path
    sha256: str

    @property
    def size(self) -> int:
        return self.path.stat().st_size


@dataclass(frozen=True)
class Toolset:
    abi: str
    benchmark_model: Tool
    run_eval: Tool | None  #: None: no inference diff on this ABI


@functools.lru_cache(maxsize=32)
def _sha256(path: Path, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _tool(path: Path) -> Tool | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return Tool(path.name, path, _sha256(path, st.st_mtime_ns, st.st_size))


def tools_root() -> Path | None:
    raw = os.environ.get(ENV_TOOLS)
    return Path(raw) if raw else None


def toolset_for(abis: list[str], root: Path | None = None) -> Toolset:
    """The tools for the first of `abis` that has a benchmark_model under `root`."""
    root = root or tools_root()
    if root is None:
        raise DeviceError(
            f"no Android tools configured on this host: set {ENV_TOOLS} to a folder with "
            f"<abi>/{BENCHMARK_MODEL} (the official TFLite build for the phone's ABI)"
        )
    known = [abi for abi in abis if abi in KNOWN_ABIS]  # never a phone's string as a path
    for abi in known:
        bench = _tool(root / abi / BENCHMARK_MODEL)
        if bench is not None:
            return Toolset(abi, bench, _tool(root / abi / RUN_EVAL))
    if not known:
        shown = clean(",".join(abis), 80) or "?"
        raise DeviceError(
            f"no ABI Android defines among {shown!r} (known: {', '.join(KNOWN_ABIS)})"
        )
    raise DeviceError(f"no {BENCHMARK_MODEL} for ABI {', '.join(known)} under {root}")
