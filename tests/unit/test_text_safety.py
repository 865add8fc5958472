"""farm_core.text_safety: NUL and bytes that are not UTF-8 escaped visibly, nothing else."""

from __future__ import annotations

import pytest

from farm_core.text_safety import storable, storable_text


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("a\x00b", "a\\x00b"),
        ("\x00\x00", "\\x00\\x00"),
        (b"ok\x00", "ok\\x00"),
        (b"bad \xff\xfe end", "bad \\xff\\xfe end"),
        (b"caf\xc3\xa9 \xe9", "café \\xe9"),  # valid UTF-8 decoded, the stray byte escaped
        (bytearray(b"\x80"), "\\x80"),
        ("x\udcff", "x\\xff"),
        (b"\xffz".decode("utf-8", "surrogateescape"), "\\xffz"),
        ("lone \ud800 high", "lone \\ud800 high"),
        ("lone \udfff low", "lone \\udfff low"),
    ],
    ids=[
        "nul",
        "two-nuls",
        "bytes-nul",
        "bytes-invalid-utf8",
        "bytes-mixed",
        "bytearray",
        "escaped-byte-surrogate",
        "surrogateescape",
        "high-surrogate",
        "low-surrogate-outside-byte-range",
    ],
)
def test_unstorable_characters_are_escaped(raw: str | bytes, stored: str) -> None:
    assert storable_text(raw) == stored


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain ascii",
        "tab\tnewline\n\r\x01\x1f\x7f",  # other control characters are storable
        "back\\slash \\x00 already escaped",
        "unicode: café 日本 😀 \ufffd \uffff",
    ],
    ids=["empty", "ascii", "controls", "backslashes", "unicode"],
)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert storable_text(text) == text
    assert storable(text) == text


def test_escaping_twice_changes_nothing() -> None:
    once = storable_text(b"a\x00\xff")
    assert storable_text(once) == once == "a\\x00\\xff"


def test_nested_json_values_and_keys_are_escaped() -> None:
    value = {
        "log\x00": "x\x00",
        "runs": [1, 2.5, None, True, "r\udcfe", {"k": b"\xff"}],
        "pair": ("a\x00", 3),
        7: "int key",
    }
    assert storable(value) == {
        "log\\x00": "x\\x00",
        "runs": [1, 2.5, None, True, "r\\xfe", {"k": "\\xff"}],
        "pair": ["a\\x00", 3],
        7: "int key",
    }


@pytest.mark.parametrize("value", [None, 0, 1.5, True, float("inf")], ids=repr)
def test_values_without_text_are_returned_as_they_are(value: object) -> None:
    assert storable(value) is value
