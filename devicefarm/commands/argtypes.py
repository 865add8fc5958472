"""argparse types for the farm commands' numbers, configurations, selectors and output
files: a bad value is a usage error (exit 2, one line) before any work starts (discovery,
health checks, a database or broker). The service URLs' types are farm_core.service_urls'."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

#: The most runs one job may ask for (orchestrator.submit checks the same bound).
MAX_RUNS = 100_000


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An int type accepting `low` <= value (<= `high`)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"{low} or more"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {value}")
        return value

    parse.__name__ = "int"  # argparse names the type in its messages
    return parse


def float_over(low: float, inclusive: bool = False) -> Callable[[str], float]:
    """A finite float type accepting values over `low` (or equal, if `inclusive`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            bound = f"{low:g} or more" if inclusive else f"more than {low:g}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {text}")
        return value

    parse.__name__ = "float"
    return parse


#: A campaign id, a run count, a count that may be zero, a TCP port.
campaign_id = int_in(1)
runs = int_in(1, MAX_RUNS)
runs_or_none = int_in(0, MAX_RUNS)
port = int_in(1, 65535)
#: Seconds: a time limit or a period (more than zero); a threshold (zero or more).
seconds = float_over(0.0)
non_negative = float_over(0.0, inclusive=True)


def configs(text: str) -> list[str]:
    """`cpu,gpu-fp32,gpu-fp16`: the configuration names, each known and given once."""
    from farm_core.configs import parse_configs

    found, errors = parse_configs(text)
    if errors:
        raise argparse.ArgumentTypeError("; ".join(errors))
    return [c.name for c in found]


def configs_text(text: str) -> str:
    """`configs`, checked, kept as the text (what submissions and the API take)."""
    configs(text)
    return text


def selector(text: str) -> str:
    """A device selector (farm_core.selectors), parsed: a malformed term is named here,
    not reported later as matching no device."""
    from farm_core.selectors import parse_selector

    _, errors = parse_selector(text)
    if errors:
        raise argparse.ArgumentTypeError("; ".join(errors))
    return text


def output_file_or_stdout(text: str) -> str:
    """A file to write, its folder existing and writable, or `-` for stdout."""
    from delegate_runtime.commands._flags import output_file

    return text if text == "-" else output_file(text)


#: Inference diff runs when none are asked for: each is a CPU reference inference plus a
#: delegate inference, seconds apiece on PoCL (OpenCL on the CPU); TFLite's tool runs 50.
DEFAULT_DIFF_RUNS = 20


def add_run_counts(p: argparse.ArgumentParser) -> None:
    """--runs and --diff-runs, with the same defaults in `run` and `submit`."""
    p.add_argument(
        "--runs", type=runs, default=50, help="benchmark runs per job, 1..100000 (default 50)"
    )
    p.add_argument(
        "--diff-runs",
        type=runs_or_none,
        default=DEFAULT_DIFF_RUNS,
        help=f"inference diff runs per GPU job, 0..100000 (default {DEFAULT_DIFF_RUNS}, fewer "
        "than TFLite's 50: each is a CPU and a GPU inference, seconds apiece on PoCL; 0: none)",
    )
