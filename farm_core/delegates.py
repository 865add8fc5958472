"""The delegates a configuration can name, and each delegate's options, as data.

A delegate is what runs the model's nodes: `cpu` (the interpreter's own kernels), `xnnpack`,
`gpu` (TFLite's GPU delegate on a phone, our OpenCL delegate on a desktop device), `nnapi`
and `hexagon`. Each option has a kind, its choices and a default; a value equal to the
default is dropped from the canonical form (farm_core.configs). Which official flag each
option becomes is farm_core.delegate_flags' table, not this module's business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: What an NNAPI accelerator name may be (the names devices report: `google-edgetpu`,
#: `qti-dsp`, `nnapi-reference`); it becomes a flag's value and part of a stored key.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,40}$")
#: Most threads an explicit configuration may ask for.
MAX_THREADS = 64


@dataclass(frozen=True)
class Option:
    """One option of a delegate: `kind` is bool, int, choice or name."""

    name: str
    kind: str
    default: str | None  #: canonical text of the default; None: unset (the tool's own)
    choices: tuple[str, ...] = ()
    help: str = ""

    def parse(self, text: str) -> tuple[str | None, str]:
        """The canonical text of `text` for this option, or (None, why not)."""
        t = text.strip()
        if self.kind == "bool":
            low = t.lower()
            if low in ("true", "1", "yes", "on"):
                return "true", ""
            if low in ("false", "0", "no", "off"):
                return "false", ""
            return None, f"{self.name} takes true or false, not {text!r}"
        if self.kind == "int":
            if t.isdigit() and 1 <= int(t) <= MAX_THREADS:
                return str(int(t)), ""
            return None, f"{self.name} takes a whole number 1..{MAX_THREADS}, not {text!r}"
        if self.kind == "choice":
            if t.lower() in self.choices:
                return t.lower(), ""
            return None, f"{self.name} takes one of {', '.join(self.choices)}, not {text!r}"
        if NAME_PATTERN.match(t):
            return t, ""
        return (
            None,
            f"{self.name} takes a name of letters, digits and ._- (at most 40), not {text!r}",
        )


@dataclass(frozen=True)
class Delegate:
    """A delegate, its options, and the device kinds whose runners can run it."""

    name: str
    options: tuple[Option, ...]
    kinds: tuple[str, ...]
    help: str = ""

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def defaults(self) -> dict[str, str]:
        return {o.name: o.default for o in self.options if o.default is not None}


_THREADS = Option("threads", "int", None, help="CPU threads (--num_threads)")
DELEGATES: dict[str, Delegate] = {
    d.name: d
    for d in (
        Delegate(
            "cpu",
            (_THREADS,),
            ("cpu", "android", "noop"),
            "the interpreter's CPU kernels (the desktop CPU reference; on a phone, "
            "benchmark_model without a delegate flag)",
        ),
        Delegate(
            "xnnpack",
            (_THREADS, Option("fp16", "bool", "false", help="force fp16 inference")),
            ("android", "noop"),
            "the XNNPACK CPU delegate, applied explicitly",
        ),
        Delegate(
            "gpu",
            (
                Option(
                    "precision", "choice", "fp32", ("fp32", "fp16"), "fp16: precision loss allowed"
                ),
                Option(
                    "backend",
                    "choice",
                    None,
                    ("cl", "gl"),
                    "force OpenCL or OpenGL ES (phones; the desktop delegate is cl)",
                ),
                Option("quant", "bool", "true", help="quantized models on the GPU"),
                Option(
                    "serialize",
                    "bool",
                    "false",
                    help="serialize compiled programs (keyed by the model's hash)",
                ),
                Option("sustained", "bool", "false", help="prefer sustained speed"),
            ),  # fmt: skip
            ("android", "opencl", "noop"),
            "TFLite's GPU delegate on a phone; our OpenCL delegate on a desktop device",
        ),
        Delegate(
            "nnapi",
            (
                Option(
                    "accelerator",
                    "name",
                    None,
                    help="the NNAPI device by the name it reports (e.g. google-edgetpu)",
                ),
                Option(
                    "preference",
                    "choice",
                    None,
                    ("fast_single_answer", "sustained_speed", "low_power", "undefined"),
                    "execution preference",
                ),
                Option("fp16", "bool", "false", help="allow fp32 computed in fp16"),
            ),  # fmt: skip
            ("android", "noop"),
            "Android's Neural Networks API, optionally on one named accelerator",
        ),
        Delegate(
            "hexagon",
            (Option("profiling", "bool", "false", help="Hexagon's own profile"),),
            ("android", "noop"),
            "Qualcomm's Hexagon DSP delegate (needs the Hexagon libraries on the phone)",
        ),
    )
}


def describe() -> str:
    """Every delegate with its options and choices, one per line (for error messages)."""
    parts = []
    for d in DELEGATES.values():
        opts = []
        for o in d.options:
            choice = "|".join(o.choices) if o.choices else {"bool": "true|false",
                     "int": "N", "name": "NAME"}[o.kind]  # fmt: skip
            opts.append(f"{o.name}={choice}")
        parts.append(f"{d.name}" + (f" ({', '.join(opts)})" if opts else ""))
    return "; ".join(parts)
