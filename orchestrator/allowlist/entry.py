"""A list command run on its own (`python -m orchestrator.allowlist.evaluate ...`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from delegate_runtime.errors import JobError


def standalone(
    prog: str,
    description: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None,
) -> int:
    """Parse `argv` and run: the command's code, or 2 with the error on stderr."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except JobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
