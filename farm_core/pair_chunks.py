"""Statements over many (job id, attempt) pairs, in chunks PostgreSQL can plan.

PostgreSQL turns `(id, attempt) IN ((..), (..), ...)` into nested ORs and plans them
recursively: 8,000 pairs in one statement (a 1,000-device campaign's first fill) passed
its stack depth limit (`max_stack_depth`, 2 MB by default) and the statement failed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

#: Pairs per statement: far below the limit, few statements for a large backlog.
PAIRS_PER_STATEMENT = 500


def chunks(items: Sequence[T], size: int = PAIRS_PER_STATEMENT) -> Iterator[Sequence[T]]:
    """`items` in slices of at most `size`, in order."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
