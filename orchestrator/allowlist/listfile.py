"""A compatibility list file: TFLite's `DeviceDatabase` flatbuffer or flatc's JSON of it."""

from __future__ import annotations

from pathlib import Path

from delegate_runtime.errors import JobError

from . import devicedb
from .tree import Node


def load_list(path: str | Path) -> list[Node]:
    """The roots of a list file (.bin flatbuffer or flatc JSON); JobError when it is
    missing or malformed (LiteRT's `GPUCompatibilityList::Create` refuses such a buffer)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise JobError(f"cannot read list {path}: {exc.strerror or exc}") from exc
    if data.lstrip()[:1] == b"{":
        try:
            return devicedb.from_json(data.decode("utf-8"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise JobError(f"{path} is not a devicedb JSON list: {exc}") from exc
    try:
        return devicedb.decode(data)
    except ValueError as exc:
        raise JobError(f"{path}: {exc}") from exc


def write_list(roots: list[Node], path: str | Path, fmt: str) -> None:
    """Write roots as `devicedb-bin` or `devicedb-json` (printed from the flatbuffer)."""
    data = devicedb.encode(roots)
    if fmt == "devicedb-json":
        data = devicedb.to_json(devicedb.decode(data)).encode()
    elif fmt != "devicedb-bin":
        raise JobError(f"unknown list format {fmt!r} (devicedb-bin or devicedb-json)")
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise JobError(f"cannot write {path}: {exc.strerror or exc}") from exc
