"""Text every database of the farm stores: a tool's output, as it printed it, made safe.

PostgreSQL refuses NUL in text and in JSONB, and no driver encodes a lone surrogate (what
`errors="surrogateescape"` makes of bytes that are not UTF-8). `storable` writes each of
those characters as a visible escape and leaves everything else as it was:

    NUL                          -> the 4 characters \\x00
    byte 0xNN that is not UTF-8  -> \\xNN  (bytes, or surrogateescape's U+DC80..U+DCFF)
    any other lone surrogate     -> \\uXXXX

Backslashes are not escaped, so the function is idempotent (an escape made twice stays
one) and the stored text reads as the tool printed it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

#: Characters no database of the farm stores: NUL and the surrogates (never valid alone).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: surrogateescape writes an undecodable byte 0xNN (0x80..0xff) as U+DC00 + 0xNN.
_ESCAPED_BYTES = range(0xDC80, 0xDD00)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def storable_text(text: str | bytes | bytearray) -> str:
    """`text` with NUL and lone surrogates escaped; bytes are decoded as UTF-8 first, each
    byte that is not UTF-8 written as `\\xNN`."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "surrogateescape")
    return _UNSTORABLE.sub(_escape, text)


def storable(value: Any) -> Any:
    """`value` with every text in it made storable (`storable_text`): strings and bytes,
    and those nested in dicts (keys too), lists and tuples; anything else unchanged."""
    if isinstance(value, str | bytes | bytearray):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def string_errors(what: str, value: str, limit: int) -> list[str]:
    """`value` too long for a column of `limit` characters, or holding control characters."""
    out = []
    if len(value) > limit:
        out.append(f"{what} is {len(value)} characters long; at most {limit} fit")
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        out.append(f"{what} holds control characters")
    return out
