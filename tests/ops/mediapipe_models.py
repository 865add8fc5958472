"""MediaPipe's production models for tests: fetched from the PyPI wheel, cached, pruned.

`model_bytes(name)` gives `mediapipe/modules/**/<name>.tflite` from the mediapipe==0.10.14
wheel, downloaded once with pip into the user cache (DEVICEFARM_MEDIAPIPE_DIR overrides
the folder). `prune(model, outputs)` rewrites a model keeping only what the named outputs
need (from named inputs, if given), so that LiteRT can run the parts of a model that do
not touch an op it lacks, or one part on one resolver and the next on another.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant

WHEEL_VERSION = "0.10.14"


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "devicefarm" / f"mediapipe-{WHEEL_VERSION}"
    return Path(os.environ.get("DEVICEFARM_MEDIAPIPE_DIR", default))


def _extract(folder: Path) -> None:
    """Download the wheel (no dependencies) and unpack its .tflite modules into `folder`."""
    wheels = folder / "wheel"
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(wheels.glob("mediapipe-*.whl")):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
            + ["--python-version", "3.11", "--platform", "manylinux2014_x86_64"]
            + [f"mediapipe=={WHEEL_VERSION}", "-d", str(wheels), "-q"],
            check=True,
            timeout=600,
        )
    (wheel,) = wheels.glob("mediapipe-*.whl")
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith("mediapipe/modules/") and name.endswith(".tflite"):
                (folder / Path(name).name).write_bytes(z.read(name))


def model_bytes(name: str) -> bytes | None:
    """The model's bytes, or None when the wheel cannot be had (no network, no pip)."""
    folder = cache_dir()
    path = folder / f"{name}.tflite"
    if not path.exists():
        try:
            _extract(folder)
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
    return path.read_bytes() if path.exists() else None


def prune(model: bytes, outputs: list[str], inputs: list[str] | None = None) -> bytes:
    """`model` (one subgraph) rebuilt with only the operators the named outputs depend on,
    starting from the named `inputs` (default: the model's own inputs)."""
    sg = read_model(model).main
    by_name = {t.name: t.index for t in sg.tensors}
    wanted = {by_name[n] for n in outputs}
    starts = [by_name[n] for n in inputs] if inputs else list(sg.inputs)
    producers = {t: op for op in sg.operators for t in op.outputs if t not in starts}
    needed: set[int] = set()
    stack = list(wanted)
    while stack:
        t = stack.pop()
        op = producers.get(t)
        if op is not None and op.index not in needed:
            needed.add(op.index)
            stack.extend(i for i in op.inputs if i >= 0)
    keep_ops = [op for op in sg.operators if op.index in needed]
    used = {i for op in keep_ops for i in (*op.inputs, *op.outputs) if i >= 0}
    used |= wanted
    b = ModelBuilder()
    g = b.main
    remap: dict[int, int] = {}
    for t in sg.tensors:
        if t.index not in used:
            continue
        q = t.quantization
        quant = Quant(q.scale, q.zero_point, q.axis) if q is not None else None
        if t.data is not None:
            remap[t.index] = g.const(t.name, t.data, quant)
        else:
            remap[t.index] = g.tensor(t.name, t.shape, t.dtype, quant, t.shape_signature)
    g.inputs = [remap[i] for i in starts if i in remap]
    for op in keep_ops:
        ins = [remap[i] if i >= 0 else -1 for i in op.inputs]
        outs = [remap[i] for i in op.outputs]
        if op.op.startswith("CUSTOM:"):
            raw = op.options.get("custom_options", b"")
            g.custom_op(op.op[len("CUSTOM:") :], ins, outs, raw, op.version)
        else:
            g.op(op.op, ins, outs, op.version, **op.options)
    g.output(*(remap[by_name[n]] for n in outputs))
    return b.build()
