"""A campaign's own input values: `--input LAYER:SHAPE:FILE` or `--input VALUES.npz`.

As benchmark_model's `--input_layer`, `--input_layer_shape` and
`--input_layer_value_files` (benchmark_tflite_model.cc): a value file holds the tensor's
raw bytes in C order and the tensor's own type, and when input values are given every
model input needs one (the tool stops on "Inputs mismatch"). An .npz gives one array per
layer, named by the layer. Submission reads and checks them against each model (layer
names, shapes, byte counts, size caps) and stores each file once by its sha256
(`input_files`); the campaign's settings hold `inputs = [{layer, shape, dtype, sha256}]`
and a worker adds `path`, its cached copy, before a runner sees them.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The settings key (worker_agent/android/invocations.py reads the same).
INPUTS = "inputs"
#: Largest value file (or .npz) accepted, bytes.
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: Most input values in one campaign.
MAX_INPUTS = 64


@dataclass(frozen=True)
class UserInput:
    """One input's values, checked against the models."""

    layer: str
    shape: tuple[int, ...]
    dtype: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def setting(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "sha256": self.sha256,
        }


def read_file(path: str, errors: list[str]) -> bytes | None:
    """A value file's bytes if it is a regular file of at most MAX_INPUT_BYTES; else None,
    the problem added to `errors`."""
    try:
        info = os.stat(path)
    except OSError as exc:
        errors.append(f"input file {path}: {exc.strerror or exc}")
        return None
    if not stat.S_ISREG(info.st_mode):
        errors.append(f"input file {path}: not a regular file")
        return None
    if info.st_size > MAX_INPUT_BYTES:
        errors.append(
            f"input file {path}: {info.st_size} bytes, at most {MAX_INPUT_BYTES} are accepted"
        )
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        errors.append(f"input file {path}: {exc.strerror or exc}")
        return None


def _shape(text: str) -> tuple[int, ...] | None:
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        return None
    return dims if dims and all(0 < d < 2**31 for d in dims) else None


def split_value(value: str) -> tuple[str, str, str] | None:
    """One `--input` value as (layer, shape text, file), ("", "", file) for an .npz; None
    when it is neither `LAYER:SHAPE:FILE` nor an .npz. The layer is everything before the
    last two ':' (a converter's names hold ':', `serving_default_input_1:0`)."""
    if value.lower().endswith(".npz") and value.count(":") < 2:
        return "", "", value
    parts = value.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    layer, shape_text, path = parts
    return layer, shape_text, path


def _given(values: Sequence[str], errors: list[str]) -> list[tuple[str, tuple | None, Any]]:
    """(layer, shape or None, raw bytes or an array) for each value of `--input`."""
    out: list[tuple[str, tuple | None, Any]] = []
    for value in values:
        split = split_value(value)
        if split is None:
            errors.append(
                f"--input {value!r}: give LAYER:SHAPE:FILE (shape 1,224,224,3) or an .npz"
            )
            continue
        layer, shape_text, path = split
        if not layer:  # an .npz: one array per layer
            data = read_file(path, errors)
            if data is None:
                continue
            try:
                with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                    out += [(name, None, npz[name]) for name in npz.files]
            except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
                errors.append(f"input file {path}: not a numpy .npz archive ({exc})")
            continue
        shape = _shape(shape_text)
        if shape is None:
            errors.append(f"--input {value!r}: shape {shape_text!r} is not positive integers")
            continue
        data = read_file(path, errors)
        if data is not None:
            out.append((layer, shape, data))
    return out


def read_inputs(values: Sequence[str], models: Sequence[Any], errors: list[str]) -> list[UserInput]:
    """The `--input` values checked against every model (delegate_runtime Models), in the
    models' input order; every problem is added to `errors` (then the list is empty)."""
    if not values:
        return []
    given = _given(values, errors)
    if len(given) > MAX_INPUTS:
        errors.append(f"{len(given)} input values given, at most {MAX_INPUTS}")
    names = [layer for layer, _, _ in given]
    for twice in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f"input {twice!r} is given twice")
    by_name = {layer: (shape, value) for layer, shape, value in given}
    out: list[UserInput] = []
    for model in models:
        sg = model.subgraphs[0]
        tensors = [sg.tensors[i] for i in sg.inputs]
        wanted = [t.name for t in tensors]
        for extra in sorted(set(by_name) - set(wanted)):
            errors.append(f"input {extra!r} is not an input of the model (inputs: {wanted})")
        missing = [n for n in wanted if n not in by_name]
        if missing and by_name:
            errors.append(
                f"inputs mismatch: the model has {len(wanted)} inputs and values for "
                f"{', '.join(missing)} are missing (benchmark_model needs every input)"
            )
        out = [_checked(t, *by_name[t.name], errors) for t in tensors if t.name in by_name]
    return [] if errors else [u for u in out if u is not None]


def _checked(t: Any, shape: tuple | None, value: Any, errors: list[str]) -> UserInput | None:
    dtype = np.dtype(t.dtype)
    if isinstance(value, np.ndarray):
        if value.dtype != dtype:
            errors.append(f"input {t.name!r}: {value.dtype} values, the model takes {dtype}")
            return None
        shape, value = tuple(int(d) for d in value.shape), np.ascontiguousarray(value).tobytes()
    sig = t.shape_signature or t.shape
    if len(shape) != len(t.shape) or any(
        s != d and g != -1 for s, d, g in zip(shape, t.shape, sig, strict=True)
    ):
        errors.append(f"input {t.name!r}: shape {list(shape)}, the model's is {list(t.shape)}")
        return None
    need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(value) != need:
        errors.append(f"input {t.name!r}: {len(value)} bytes, {list(shape)} {dtype} needs {need}")
        return None
    return UserInput(t.name, shape, dtype.name, value)


def arrays(items: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    """A job's input values as arrays, from settings items with `path`, `shape`, `dtype`."""
    out = []
    for item in items:
        data = Path(item["path"]).read_bytes()
        out.append(np.frombuffer(data, np.dtype(item["dtype"])).reshape(item["shape"]).copy())
    return out
