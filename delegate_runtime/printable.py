"""Text from models and users made safe for a terminal."""

from __future__ import annotations


def printable(text: object, keep: str = "") -> str:
    """`text` with control and other unprintable characters escaped (`\\x1b`, `\\r`), so a
    name read from a model cannot move the cursor, clear the screen or fake a line;
    characters in `keep` (say "\\n" for a message of several lines) stay as they are."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii")
        for c in text
    )
