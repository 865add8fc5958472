"""Gathered evidence (collect.Gathered) as compressed JSON and back, equal to the bit.

A 1,000-device farm's is about 3 MB of JSON, 0.7 MB compressed: each entry is its
variables, devices seen, devices current, CPU baseline (with why it is missing) and one
list of figures per configuration, in ConfigStats' field order. JSON writes a float as
its repr, so every figure reads back as the same float. No code is ever loaded (unlike
pickle): the bytes come from a database other processes write to.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from typing import Any

from .collect import Gathered
from .rules import ConfigStats, Evidence

#: Bump when gather's output changes meaning: older stored bytes then read as absent.
FORMAT = 1
#: ConfigStats' fields in the order written (part of the format: a change reads as absent).
FIELDS = tuple(f.name for f in dataclasses.fields(ConfigStats))
#: zlib's level: 1 is a tenth of 6's time for 10 % more bytes.
LEVEL = 1


def tag() -> str:
    """What bytes written by this code can be read by: FORMAT and the fields."""
    return f"{FORMAT}:{','.join(FIELDS)}"


def dumps(g: Gathered) -> bytes:
    """`g` as zlib-compressed JSON."""
    entries = {
        model: [
            [
                variables,
                keys,
                current,
                [[getattr(s, f) for f in FIELDS] for s in e.configs.values()],
                e.cpu_us,
                e.no_cpu,
            ]  # fmt: skip
            for variables, keys, current, e in listed
        ]
        for model, listed in g.entries.items()
    }
    doc = {"tag": tag(), "models": g.models, "entries": entries}
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), LEVEL)


def loads(data: bytes) -> Gathered:
    """The Gathered that dumps wrote; ValueError when the bytes are another format's."""
    doc: dict[str, Any] = json.loads(zlib.decompress(data))
    if doc.get("tag") != tag():
        raise ValueError(f"gathered evidence of format {doc.get('tag')!r}, not {tag()!r}")
    entries = {
        model: [
            (variables, keys, current, Evidence({s[0]: ConfigStats(*s) for s in stats}, cpu, why))
            for variables, keys, current, stats, cpu, why in listed
        ]
        for model, listed in doc["entries"].items()
    }
    return Gathered(doc["models"], entries)
