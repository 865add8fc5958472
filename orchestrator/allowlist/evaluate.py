"""Ask a compatibility list about a device, as an app's LiteRT does:

    devicefarm allowlist evaluate LIST --facts 'tflite.device_model=M712C,tflite.android_sdk_version=24'

The facts are canonicalised with their keys (`CanonicalizeValueWithKey`), the tree is
walked as devicedb.cc walks it, and the variables after the walk are printed, then the
status as `GPUCompatibilityList::GetStatus` maps it: SUPPORTED, UNSUPPORTED or UNKNOWN
(the last line). A per-delegate list (`devicefarm allowlist --delegate nnapi`) answers
the same way from its `devicefarm.<delegate>.status`; the list says whose it is.
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
from .rules import LIST_DELEGATES, SUPPORTED, UNSUPPORTED
from .tree import (
    GPU,
    STATUS_SUPPORTED,
    STATUS_UNKNOWN,
    STATUS_UNSUPPORTED,
    Node,
    status_variable,
)

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
    p.add_argument(
        "--delegate",
        dest="list_delegate",
        choices=LIST_DELEGATES,
        default=None,
        help="whose status to read (default: the one the list holds; gpu: tflite.gpu.status)",
    )


def list_delegate(roots: list[Node], path: str, wanted: str | None = None) -> str:
    """The delegate whose status a list holds (gpu for an empty list); `wanted` when given
    and held; JobError when the list holds another's, or several and none is named."""
    held = reader.delegates(roots)
    if wanted is not None:
        if held and wanted not in held:
            raise JobError(f"{path} is a {' and '.join(sorted(held))} list, not a {wanted} one")
        return wanted
    if len(held) > 1:
        raise JobError(f"{path} holds {', '.join(sorted(held))} statuses: give --delegate")
    return held.pop() if held else GPU


def evaluate_list(
    list_path: str, facts: dict[str, str], delegate: str | None = None
) -> tuple[dict[str, str], str, str]:
    """(variables after the walk, LiteRT's status name, the status property read) for
    facts on a list file; the status of `delegate` (default: the one the list holds)."""
    roots = load_list(list_path)
    variable = status_variable(list_delegate(roots, list_path, delegate))
    variables = reader.evaluate(roots, facts)
    status = _LITERT_STATUS.get(reader.status(roots, facts, variable), STATUS_UNKNOWN)
    return variables, status, variable


def run(args: argparse.Namespace) -> int:
    facts = parse_facts(args.facts)
    if not facts:
        raise JobError("give the device's facts: --facts 'tflite.device_model=...,...'")
    variables, status, variable = evaluate_list(args.list, facts, args.list_delegate)
    for name in sorted(variables):
        if name != variable:
            print(f"{name}={variables[name]}")
    print(status)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`evaluate LIST --facts ...` on its own: 0, or 2 with the error on stderr."""
    return standalone("devicefarm allowlist evaluate", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
