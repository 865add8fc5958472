"""Device selectors: `kind=opencl,vendor=nvidia|amd,driver>=535,tag=lab1` or a key glob.

Terms are separated by commas and all must hold. A term is `field OP value` with OP one of
`=`, `!=`, `>=`, `<=`; `=`/`!=` take shell globs and `a|b` alternatives, `>=`/`<=` compare
versions numerically part by part. A bare term is a key glob (`opencl:*`); one holding `<`,
`>` or `=` (`driver>>1`) is an error naming it, never a glob that matches nothing. `all`
(or `*`) matches every device. Fields: key, kind, vendor, model, driver, renderer, host, api, tag,
sdk (a phone's Android SDK level: `sdk>=33`) and abi (a phone's primary ABI,
`ro.product.cpu.abi`: `abi=arm64-v8a`). `driver>=`/`driver<=` read the driver version in
its vendor's notation (farm_core.driver_versions: Mali `v1.r36p0`, Adreno `V@0676.0`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from . import driver_versions

#: selector field -> device column (tag is special: any of the device's tags)
FIELDS = {
    "key": "key",
    "kind": "kind",
    "vendor": "vendor",
    "model": "model",
    "driver": "driver_version",
    "renderer": "renderer",
    "host": "host",
    "api": "api_version",
    "tag": "tags",
    "sdk": "android_sdk",
    "abi": "abi",
}
#: the device fact a phone's primary ABI is read from
ABI_FACT = "ro.product.cpu.abi"
OPERATORS = ("=", "!=", ">=", "<=")
_TERM = re.compile(r"^\s*([a-z_]+)\s*(!=|>=|<=|=)\s*(.*?)\s*$")
#: A key glob never holds these (device keys are `kind:name`, globs add `*?[!]`).
_OPERATOR_CHARS = re.compile(r"[<>=]")


@dataclass(frozen=True)
class Term:
    field: str
    op: str
    value: str

    def test(self, device: Mapping[str, Any]) -> bool:
        raw = _column(device, self.field)
        values = [str(v) for v in raw] if isinstance(raw, list | tuple) else [str(raw or "")]
        if self.op in (">=", "<=") and self.field == "driver":
            return driver_versions.compare(device, self.op, self.value)
        if self.op in (">=", "<="):
            want = _version(self.value)
            cmp: Callable[[tuple, tuple], bool] = (
                (lambda a, b: a >= b) if self.op == ">=" else (lambda a, b: a <= b)
            )
            return any(_version(v) and cmp(_version(v), want) for v in values)
        hit = any(
            fnmatchcase(v.lower(), alt.strip().lower())
            for v in values
            for alt in self.value.split("|")
        )
        return hit if self.op == "=" else not hit


def _column(device: Mapping[str, Any], field: str) -> Any:
    if field == "abi":
        facts = device.get("facts") or {}
        return facts.get(ABI_FACT, "") if isinstance(facts, Mapping) else ""
    value = device.get(FIELDS[field])
    return "" if value is None else value


#: Most digits in one part of a version number (int() of thousands of digits is refused).
MAX_VERSION_DIGITS = 18
#: Most characters in a selector.
MAX_SELECTOR_CHARS = 2000


def _version(text: str) -> tuple[int, ...]:
    """`"535.104.05"` -> (535, 104, 5); the numbers found in order. () when there is none or
    a part is longer than MAX_VERSION_DIGITS (no version, as for a value without digits)."""
    if _too_long_number(text):
        return ()
    return tuple(int(n) for n in re.findall(r"\d+", text))


def _too_long_number(text: str) -> bool:
    return re.search(rf"\d{{{MAX_VERSION_DIGITS + 1}}}", text) is not None


@dataclass(frozen=True)
class Selector:
    text: str
    terms: tuple[Term, ...]

    def matches(self, device: Mapping[str, Any]) -> bool:
        """Whether a device (a mapping of device columns) satisfies every term."""
        return all(t.test(device) for t in self.terms)


def parse_selector(text: str) -> tuple[Selector | None, list[str]]:
    """The parsed selector, or None with every error found in `text`."""
    text = (text or "").strip()
    if not text:
        return None, ["empty device selector (use 'all', a key glob, or field=value terms)"]
    if len(text) > MAX_SELECTOR_CHARS:
        return None, [
            f"device selector is {len(text)} characters long; at most {MAX_SELECTOR_CHARS}"
        ]
    if text in ("all", "*"):
        return Selector(text, ()), []
    terms, errors = [], []
    for part in text.split(","):
        if not part.strip():
            errors.append(f"empty term in selector {text!r}")
            continue
        m = _TERM.match(part)
        if m is None and _OPERATOR_CHARS.search(part):  # `driver>>1`, `driver>1`, `Kind=x`
            errors.append(
                f"bad selector term {part.strip()!r}: expected FIELD OP VALUE with OP one of "
                f"{', '.join(OPERATORS)} (fields: {', '.join(FIELDS)}), or a device key glob"
            )
            continue
        if m is None:
            terms.append(Term("key", "=", part.strip()))
            continue
        field, op, value = m.groups()
        if value and value[0] in "=<>!":  # `driver=>535`, `kind==opencl`
            errors.append(
                f"bad selector term {part.strip()!r}: its value starts with {value[0]!r} "
                f"(operators: {', '.join(OPERATORS)})"
            )
        elif field not in FIELDS:
            errors.append(
                f"unknown selector field {field!r} in {part.strip()!r} "
                f"(fields: {', '.join(FIELDS)})"
            )
        elif not value:
            errors.append(f"selector term {part.strip()!r} has no value")
        elif op in (">=", "<=") and _too_long_number(value):
            errors.append(
                f"selector term {part.strip()[:60]!r}: a version part has more than "
                f"{MAX_VERSION_DIGITS} digits"
            )
        elif op in (">=", "<=") and field == "driver" and not driver_versions.is_version(value):
            errors.append(
                f"selector term {part.strip()!r}: {op} needs a version number "
                "(a driver version: 535.104, v1.r36p0, V@0676.0)"
            )
        elif op in (">=", "<=") and not _version(value):
            errors.append(f"selector term {part.strip()!r}: {op} needs a version number")
        else:
            terms.append(Term(field, op, value))
    if errors:
        return None, errors
    return Selector(text, tuple(terms)), []
