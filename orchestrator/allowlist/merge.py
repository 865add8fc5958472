"""One list for an app: LiteRT's shipped list with our measured decisions on top.

An app's `GPUCompatibilityList` holds one database, so a custom list alone loses the
shipped list's rules (GLES below 3.1, known-bad devices). The merged list is the shipped
roots followed by ours: LiteRT follows every root and later properties win, so where we
measured, our decision stands, and elsewhere the shipped one does.

Where our tree says UNKNOWN on purpose (a device listed so it does not inherit another's
decision, or a driver version nobody measured), the merged list gives the shipped list's
answer for what that path knows instead of wiping it.

    devicefarm allowlist merge OURS --base gpu_compatibility.bin --out merged.bin
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from delegate_runtime.commands._flags import existing_file, output_file
from delegate_runtime.errors import JobError

from . import reader
from .entry import standalone
from .listfile import load_list, write_list
from .rules import SUPPORTED, UNSUPPORTED
from .tree import (
    EQUAL,
    GPU,
    STATUS,
    STATUS_SUPPORTED,
    STATUS_UNKNOWN,
    STATUS_UNSUPPORTED,
    Edge,
    Node,
)

_LITERT_STATUS = {SUPPORTED: STATUS_SUPPORTED, UNSUPPORTED: STATUS_UNSUPPORTED}


def _defer(nodes: Sequence[Node], path: dict[str, str], base: Sequence[Node]) -> list[Node]:
    """Our nodes with each UNKNOWN status replaced by the base list's answer for the
    variables the path has fixed (EQUAL edges only: a range fixes no value)."""
    out = []
    for node in nodes:
        items = []
        for edge in node.items:
            here = path | {node.variable: edge.value} if node.comparison == EQUAL else path
            props = list(edge.derived_properties)
            if (STATUS, STATUS_UNKNOWN) in props and node.variable is not None:
                shipped = _LITERT_STATUS.get(reader.status(base, here))
                if shipped:
                    props = [(k, shipped if k == STATUS else v) for k, v in props]
            items.append(Edge(edge.value, _defer(edge.children, here, base), props))
        out.append(Node(node.variable, node.comparison, items))
    return out


def merged(base: Sequence[Node], ours: Sequence[Node]) -> list[Node]:
    """The base list's roots, then ours (deferring our UNKNOWNs to the base)."""
    return [*base, *_defer(ours, {}, base)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "ours", metavar="OURS", type=existing_file, help="our list (devicedb .bin or JSON)"
    )
    p.add_argument(
        "--base",
        required=True,
        type=existing_file,
        help="the list to layer ours on: LiteRT's gpu_compatibility.bin (.bin or JSON)",
    )
    p.add_argument(
        "--out",
        required=True,
        type=output_file,
        help="the merged list to write, in a folder that exists",
    )
    p.add_argument("--format", choices=("devicedb-bin", "devicedb-json"), default="devicedb-bin")


def run(args: argparse.Namespace) -> int:
    ours = load_list(args.ours)
    others = sorted(reader.delegates(ours) - {GPU})
    if others:  # LiteRT's shipped list is a GPU list: another delegate's stays apart
        raise JobError(
            f"{args.ours} is a {' and '.join(others)} list: only a GPU list merges onto "
            "LiteRT's; ship another delegate's list as a file of its own"
        )
    roots = merged(load_list(args.base), ours)
    write_list(roots, args.out, args.format)
    print(f"wrote {args.format} to {args.out}: {args.base} with {args.ours} on top")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`merge OURS --base LIST --out FILE` on its own: 0, or 2 with the error on stderr."""
    return standalone("devicefarm allowlist merge", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
