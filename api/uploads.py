"""Submission input from a request: model uploads (multipart parts or a raw body) and input
value files (`input_file` parts, each after its `input` field) saved under a temporary
folder by checked file names, and the form's parameters typed."""

from __future__ import annotations

import math
import os
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, TypeVar

from starlette.datastructures import UploadFile
from starlette.requests import Request

from .errors import ApiError

T = TypeVar("T")
#: Most model files in one submission, and most other form fields.
MAX_MODELS = 64
MAX_FIELDS = 32
#: The most characters of a model's file name (StoredModel.name's column).
MAX_NAME_CHARS = 255
COPY_CHUNK_BYTES = 1024 * 1024


def checked_file_name(name: str | None) -> str:
    """`name` if it is a plain file name (no folder, no `..`, no control characters);
    ApiError 400 otherwise: a name is stored and shown, never used as a path as given."""
    if not name:
        raise ApiError(400, "a model needs a file name (multipart filename, or ?filename=)")
    plain = PurePosixPath(name).name == name and PureWindowsPath(name).name == name
    if not plain or name in (".", "..") or name.startswith("."):
        raise ApiError(400, f"model file name {name[:80]!r} is not a plain file name")
    if any(unicodedata.category(ch) in ("Cc", "Cf") for ch in name):
        raise ApiError(400, f"model file name {name[:80]!r} holds control characters")
    if len(name) > MAX_NAME_CHARS:
        raise ApiError(400, f"model file name is {len(name)} characters; at most {MAX_NAME_CHARS}")
    return name


def _mib(n: int) -> str:
    return f"{n / 1024**2:.1f} MiB"


class ModelFolder:
    """Uploaded models, each saved as `<folder>/<index>/<name>` (two uploads may share a
    name), refused with 413 once one is over `max_bytes`."""

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int):
        self.folder, self.max_bytes = Path(folder), max_bytes
        self.paths: list[Path] = []

    def _open(self, name: str) -> Any:
        if len(self.paths) >= MAX_MODELS:
            raise ApiError(400, f"at most {MAX_MODELS} models in one submission")
        sub = self.folder / str(len(self.paths))
        sub.mkdir()
        path = sub / checked_file_name(name)
        self.paths.append(path)
        return path.open("xb")

    def _over(self, name: str) -> ApiError:
        return ApiError(413, f"model {name}: over the {_mib(self.max_bytes)} model cap")

    async def add_stream(self, name: str, request: Request) -> None:
        """The raw request body as one model."""
        size = 0
        with self._open(name) as f:
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_bytes:
                    raise self._over(name)
                f.write(chunk)

    async def add_upload(self, upload: UploadFile) -> None:
        """One multipart file part."""
        name = checked_file_name(upload.filename)
        if upload.size is not None and upload.size > self.max_bytes:
            raise self._over(name)
        with self._open(name) as f:
            await _copy(upload, f, self.max_bytes, lambda: self._over(name))


async def _copy(upload: UploadFile, f: Any, max_bytes: int, over: Callable[[], ApiError]) -> None:
    size = 0
    while chunk := await upload.read(COPY_CHUNK_BYTES):
        size += len(chunk)
        if size > max_bytes:
            raise over()
        f.write(chunk)


class InputFolder:
    """A submission's input value files, as `--input` takes them: each `input_file` part
    follows its `input` field (`LAYER:SHAPE`, or empty for an .npz). Each is saved as
    `<folder>/<index>/values.bin` (or `values.npz`), refused with 413 over the input cap;
    `values` are the `--input` values that name the saved files, `names` maps each saved
    path to the name it was sent under (for messages)."""

    def __init__(self, folder: str | os.PathLike[str]):
        from farm_core.user_inputs import MAX_INPUT_BYTES

        self.folder, self.max_bytes = Path(folder), MAX_INPUT_BYTES
        self.values: list[str] = []
        self.names: dict[str, str] = {}

    async def add_upload(self, spec: str, upload: UploadFile) -> None:
        """One value file, with its `input` field's `LAYER:SHAPE` (or "" for an .npz)."""
        from farm_core.user_inputs import MAX_INPUTS

        name = checked_file_name(upload.filename)
        if len(self.values) >= MAX_INPUTS:
            raise ApiError(400, f"at most {MAX_INPUTS} input value files in one submission")
        npz = not spec
        if npz and not name.lower().endswith(".npz"):
            raise ApiError(400, f"input file {name}: give its LAYER:SHAPE, or send an .npz")
        sub = self.folder / str(len(self.values))
        sub.mkdir(parents=True)
        path = sub / ("values.npz" if npz else "values.bin")

        def over() -> ApiError:
            return ApiError(413, f"input file {name}: over the {_mib(self.max_bytes)} input cap")

        if upload.size is not None and upload.size > self.max_bytes:
            raise over()
        with path.open("xb") as f:
            await _copy(upload, f, self.max_bytes, over)
        self.values.append(str(path) if npz else f"{spec}:{path}")
        self.names[str(path)] = name


class Params:
    """Typed parameters from the query string and form fields; every bad value is kept and
    raised together (`check`) as one 400."""

    def __init__(self, *sources: Mapping[str, Any]):
        self.values: dict[str, str] = {}
        for source in sources:
            for key, value in source.items():
                if isinstance(value, str):
                    self.values[key] = value
        self.errors: list[str] = []

    def _get(self, key: str, parse: Callable[[str], T], default: T, what: str) -> T:
        raw = self.values.get(key)
        if raw is None or raw == "":
            return default
        try:
            return parse(raw)
        except ValueError:
            self.errors.append(f"{key}: not {what}: {raw[:40]!r}")
            return default

    def text(self, key: str, default: str = "") -> str:
        return self.values.get(key, default)

    def integer(self, key: str, default: int) -> int:
        return self._get(key, int, default, "a whole number")

    def number(self, key: str, default: float | None) -> float | None:
        def finite(raw: str) -> float:
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
            return value

        return self._get(key, finite, default, "a finite number")

    def flag(self, key: str) -> bool:
        def boolean(raw: str) -> bool:
            if raw.lower() in ("1", "true", "yes"):
                return True
            if raw.lower() in ("0", "false", "no"):
                return False
            raise ValueError(raw)

        return self._get(key, boolean, False, "true or false")

    def check(self) -> None:
        if self.errors:
            raise ApiError(400, "; ".join(self.errors), self.errors)
