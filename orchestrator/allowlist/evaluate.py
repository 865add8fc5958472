"""Ask a compatibility list about a device, as an app's LiteRT does:

    devicefarm allowlist evaluate LIST --facts 'tflite.device_model=M712C,tflite.android_sdk_version=24'

The facts are canonicalised with their keys (`CanonicalizeValueWithKey`), the tree is
walked as devicedb.cc walks it, and the variables after the walk are printed, then the
status as `GPUCompatibilityList::GetStatus` maps it: SUPPORTED, UNSUPPORTED or UNKNOWN
(the last line).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from delegate_runtime.commands._flags import existing_file
from delegate_runtime.errors import JobError

from . import reader
from .entry import standalone
from .listfile import load_list
from .rules import SUPPORTED, UNSUPPORTED
from .tree import STATUS, STATUS_SUPPORTED, STATUS_UNKNOWN, STATUS_UNSUPPORTED

#: A comma starts the next fact only where `name=` follows (renderers contain commas).
_NEXT_FACT = re.compile(r",(?=\s*[A-Za-z_][\w.]*=)")
_LITERT_STATUS = {SUPPORTED: STATUS_SUPPORTED, UNSUPPORTED: STATUS_UNSUPPORTED}


def parse_facts(texts: Sequence[str]) -> dict[str, str]:
    """`name=value` pairs separated by commas (a value may hold commas); JobError on a
    pair without `=` or a name given twice."""
    out: dict[str, str] = {}
    for text in texts:
        for part in _NEXT_FACT.split(text):
            if not part.strip():
                continue
            name, eq, value = part.partition("=")
            name = name.strip()
            if not eq or not name:
                raise JobError(f"fact {part.strip()!r} is not name=value")
            if name in out:
                raise JobError(f"fact {name} is given twice")
            out[name] = value.strip()
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "list",
        metavar="LIST",
        type=existing_file,
        help="a devicedb list: .bin flatbuffer or its JSON",
    )
    p.add_argument(
        "--facts",
        action="append",
        default=[],
        metavar="K=V,...",
        help="the device's variables, e.g. tflite.device_model=M712C,"
        "tflite.android_sdk_version=24 (repeatable)",
    )


def evaluate_list(list_path: str, facts: dict[str, str]) -> tuple[dict[str, str], str]:
    """(variables after the walk, LiteRT's status name) for facts on a list file."""
    roots = load_list(list_path)
    variables = reader.evaluate(roots, facts)
    status = _LITERT_STATUS.get(reader.status(roots, facts), STATUS_UNKNOWN)
    return variables, status


def run(args: argparse.Namespace) -> int:
    facts = parse_facts(args.facts)
    if not facts:
        raise JobError("give the device's facts: --facts 'tflite.device_model=...,...'")
    variables, status = evaluate_list(args.list, facts)
    for name in sorted(variables):
        if name != STATUS:
            print(f"{name}={variables[name]}")
    print(status)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`evaluate LIST --facts ...` on its own: 0, or 2 with the error on stderr."""
    return standalone("devicefarm allowlist evaluate", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
