"""Parse the official `benchmark_model`'s output into a `BenchmarkResult`.

The Android runner captures the tool's stdout (or logcat) and turns it into the same
record our own benchmark produces. Accepted variants (REFERENCE.md): lines with or without
an `INFO: ` (or logcat) prefix; `count=` lines with and without percentiles, the
`(all same)` form with or without a space, `count=1 curr=X`, `avg` in exponent form, an
integer `std`; old builds' `Average inference timings` and `Peak memory footprint` lines;
the GPU delegate's delegation lines; op profiling tables (`Run Order`, `Top by
Computation Time`, summary by node type), with or without the old `[start]` column.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from .benchmark import BenchmarkResult, RunStats
from .memory import MemoryReport

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
#: Log prefixes before the message: "INFO: ", "I/tflite  ( 1234): ", "06-01 ... I tflite : ".
_PREFIX = re.compile(
    r"^(?:(?:INFO|WARNING|ERROR|VERBOSE): |[VDIWEF]/[\w.-]+\s*\(\s*\d+\): |"
    r"\d\d-\d\d [\d:.]+\s+\d+\s+\d+ [VDIWEF] [\w.-]+\s*: )"
)
_COUNT = re.compile(r"^count=(\d+)(.*)$")
_FIELD = re.compile(rf"\b(first|curr|min|max|avg|std|p5|median|p95)=({_NUM})")
_RUNNING = re.compile(
    r"^Running benchmark for at least (\d+) iterations and at least ([\d.e+-]+) seconds"
)
_TIMINGS = re.compile(
    rf"^Inference timings in us: Init: ({_NUM}), First inference: ({_NUM}), "
    rf"Warmup \(avg\): ({_NUM}), Inference \(avg\): ({_NUM})"
)
_OLD_TIMINGS = re.compile(
    rf"^Average inference timings in us: Warmup: ({_NUM}), Init: ({_NUM}), "
    rf"(?:Inference|no stats): ({_NUM})"
)
_MEMORY = re.compile(
    rf"^(?:Memory footprint delta from the start of the tool|Peak memory footprint) \(MB\): "
    rf"init=({_NUM}) overall=({_NUM})"
)
_PEAK = re.compile(rf"^Overall peak memory footprint \(MB\) via periodic monitoring: ({_NUM})")
_SIZE = re.compile(rf"^The input model file size \(MB\): ({_NUM})")
_INIT = re.compile(rf"^Initialized session in ({_NUM})ms")
_LOADED = re.compile(r"^Loaded model (.+)$")
_PARAM = re.compile(r"^([A-Za-z][\w ()/.-]*?): \[(.*)\]$")
_APPLIED = re.compile(
    r"^Explicitly applied (\w+) delegate, and the model graph will be (\w+) executed"
)
_KERNELS = re.compile(r"w/ (\d+) delegate kernels")
_REPLACING = re.compile(
    r"^Replacing (\d+) out of (\d+) node\(s\) with delegate \(([^)]*)\) node, yielding (\d+) partitions"
)
_ON_GPU = re.compile(r"^(\d+) operations will run on the GPU, and the remaining (\d+) operations")
_NONE_ON_GPU = re.compile(r"^No operations will run on the GPU, and all (\d+) operations")
_OLD_UNSUPPORTED = re.compile(r"^(?:WARNING: )?op code #(\d+) cannot be handled by this delegate")
_UNSUPPORTED_HEAD = "Following operations are not supported by GPU delegate:"
_UNSUPPORTED_ITEM = re.compile(r"^([A-Za-z][\w :/.-]*?): (.+)$")
_TABLE_TITLE = re.compile(r"^=+ (.+?) =+$")
_NODES_EXECUTED = re.compile(r"^Number of nodes executed: (\d+)")
_INIT_PROFILE = "Profiling Info for Benchmark Initialization"


class BenchmarkParseError(ValueError):
    """The text holds no complete benchmark (the tool failed, or this is not its output)."""


def strip_prefix(line: str) -> str:
    """The message of a log line: prefixes and surrounding whitespace removed."""
    line = line.rstrip("\r\n")
    while True:
        m = _PREFIX.match(line)
        if not m:
            return line.strip()
        line = line[m.end() :]


def _num(text: str) -> float:
    return float(text)


def parse_stat_line(line: str) -> RunStats:
    """A `count=` line (any variant) into RunStats; runs_us stays empty."""
    m = _COUNT.match(line.strip())
    if not m:
        raise BenchmarkParseError(f"not a statistics line: {line!r}")
    count = int(m.group(1))
    fields = {k: _num(v) for k, v in _FIELD.findall(m.group(2))}
    stats = RunStats(count=count)
    if count == 0:
        return stats
    if "first" not in fields and "curr" in fields:  # all same, or a single run
        same = int(fields["curr"])
        stats.first_us = stats.curr_us = stats.min_us = stats.max_us = same
        stats.avg_us, stats.std_us = float(same), 0
    else:
        for key in ("first", "curr", "min", "max", "std"):
            if key in fields:
                setattr(stats, f"{key}_us", int(fields[key]))
        stats.avg_us = fields.get("avg")
    for key in ("p5", "median", "p95"):
        if key in fields:
            setattr(stats, f"{key}_us", int(fields[key]))
    return stats


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


class _Parser:
    def __init__(self) -> None:
        self.result = BenchmarkResult(source="benchmark_model")
        self.memory = MemoryReport()
        self.stats: list[RunStats] = []
        self.running = 0
        self.delegation: dict[str, Any] = {}
        self.unsupported: list[dict[str, str]] = []
        self.in_unsupported = False
        self.errors: list[str] = []
        self.profile: dict[str, Any] = {}
        self.table: str | None = None
        self.columns: list[str] = []
        self.in_init_profile = False
        self.timings: tuple[float, float] | None = None  #: (warm-up avg, inference avg)

    def feed(self, raw: str) -> None:
        if raw.lstrip().startswith(("ERROR:", "E/")):
            self.errors.append(strip_prefix(raw))
        if "\t" in raw and self.table is not None:
            self.table_row(raw)
            return
        line = strip_prefix(raw)
        if not line:
            self.table = None
            return
        if self.in_unsupported:
            if self.unsupported_line(line):
                return
            self.in_unsupported = False
        for handler in (self.timing_line, self.delegate_line, self.profile_line, self.param_line):
            if handler(line):
                return

    # -- figures ----------------------------------------------------------------

    def timing_line(self, line: str) -> bool:
        r = self.result
        if m := _COUNT.match(line):
            if self.running:
                self.stats.append(parse_stat_line(line))
            return True
        if m := _RUNNING.match(line):
            self.running += 1
            return True
        if m := _TIMINGS.match(line):
            r.init_us = int(_num(m.group(1)))
            r.first_inference_us = int(_num(m.group(2)))
            self.timings = (_num(m.group(3)), _num(m.group(4)))
            return True
        if m := _OLD_TIMINGS.match(line):
            self.timings = (_num(m.group(1)), _num(m.group(3)))
            r.init_us = int(_num(m.group(2)))
            return True
        if m := _MEMORY.match(line):
            self.memory.init_mb, self.memory.overall_mb = _num(m.group(1)), _num(m.group(2))
            return True
        if m := _PEAK.match(line):
            self.memory.peak_mb = _num(m.group(1))
            return True
        if m := _SIZE.match(line):
            r.model_size_bytes = round(_num(m.group(1)) * 1e6)
            return True
        if m := _INIT.match(line):
            if r.init_us is None:
                r.init_us = round(_num(m.group(1)) * 1000)
            return True
        if m := _LOADED.match(line):
            r.model_path = m.group(1).strip()
            return True
        return False

    # -- delegation ---------------------------------------------------------------

    def delegate_line(self, line: str) -> bool:
        d = self.delegation
        if line.startswith(_UNSUPPORTED_HEAD):
            self.in_unsupported = True
            return True
        if m := _APPLIED.match(line):
            d["delegate"] = d.get("delegate") or f"{m.group(1)}"
            d["fully_delegated"] = m.group(2) == "completely"
            if k := _KERNELS.search(line):
                d["partitions"] = int(k.group(1))
            return True
        if m := _REPLACING.match(line):
            d["nodes_delegated"], d["nodes_total"] = int(m.group(1)), int(m.group(2))
            d["delegate"], d["partitions"] = m.group(3), int(m.group(4))
            return True
        if m := _OLD_UNSUPPORTED.match(line):
            self.unsupported.append(
                {"op": f"op code #{m.group(1)}", "reason": "cannot be handled by this delegate"}
            )
            return True
        return False

    def unsupported_line(self, line: str) -> bool:
        d = self.delegation
        if m := _ON_GPU.match(line):
            on_gpu, on_cpu = int(m.group(1)), int(m.group(2))
            d.setdefault("ops_on_gpu", on_gpu)
            d.setdefault("ops_total", on_gpu + on_cpu)
            return True
        if m := _NONE_ON_GPU.match(line):
            d["ops_on_gpu"], d["ops_total"] = 0, int(m.group(1))
            return True
        if m := _UNSUPPORTED_ITEM.match(line):
            self.unsupported.append({"op": m.group(1), "reason": m.group(2).strip()})
            return True
        return False

    # -- op profile -----------------------------------------------------------------

    def profile_line(self, line: str) -> bool:
        if _INIT_PROFILE in line:
            self.in_init_profile = True
            return True
        if "Profiling Info for Regular Benchmark Runs" in line:
            self.in_init_profile = False
            return True
        if m := _TABLE_TITLE.match(line):
            self.table = m.group(1)
            self.columns = []
            return True
        if m := _NODES_EXECUTED.match(line):
            if not self.in_init_profile:
                self.profile["nodes_executed"] = int(m.group(1))
            return True
        return False

    def table_row(self, raw: str) -> None:
        cells = [c.strip() for c in strip_prefix(raw).split("\t") if c.strip()]
        if not cells or self.in_init_profile:
            return
        if cells[0].startswith("["):
            self.columns = [c.strip("[]").lower() for c in cells]
            return
        if not self.columns or len(cells) < len(self.columns) - 1:
            return
        row: dict[str, Any] = {}
        # Not strict: one cell fewer (empty cells are dropped above) or more (tabs in a name).
        for col, cell in zip(self.columns, cells, strict=False):
            value: Any = cell.rstrip("%")
            if col not in ("node type", "name"):
                with contextlib.suppress(ValueError):
                    value = float(value)
            row[col] = value
        if len(cells) > len(self.columns):  # a name holding tabs
            row["name"] = "\t".join(cells[len(self.columns) - 1 :])
        key = {"Run Order": "nodes", "Top by Computation Time": "top_by_time"}.get(
            self.table or "", "by_type" if self.table == "Summary by node type" else None
        )
        if key:
            self.profile.setdefault(key, []).append(_profile_row(row))

    # -- parameters -------------------------------------------------------------------

    def param_line(self, line: str) -> bool:
        if m := _PARAM.match(line):
            self.result.options[_snake(m.group(1))] = m.group(2)
            if _snake(m.group(1)) == "graph" and not self.result.model_path:
                self.result.model_path = m.group(2)
            return True
        return False

    # -- result -------------------------------------------------------------------------

    def finish(self, text: str) -> BenchmarkResult:
        r = self.result
        if len(self.stats) < 2:
            why = "; ".join(self.errors[-3:]) or "no statistics for the timed runs"
            raise BenchmarkParseError(f"incomplete benchmark_model output: {why}")
        r.warmup, r.inference = self.stats[0], self.stats[-1]
        if self.timings is not None:
            for stats, avg in zip((r.warmup, r.inference), self.timings, strict=True):
                if stats.avg_us is None:
                    stats.avg_us = avg
        if r.first_inference_us is None and r.warmup.first_us is not None:
            r.first_inference_us = r.warmup.first_us
        r.memory = self.memory
        if self.delegation or self.unsupported:
            d = self.delegation
            d.setdefault("delegate", None)
            d.setdefault("nodes_delegated", d.get("ops_on_gpu"))
            d.setdefault("nodes_total", d.get("ops_total"))
            d.setdefault("partitions", None)
            d.setdefault("fully_delegated", not self.unsupported and bool(d.get("nodes_delegated")))
            d["unsupported"] = self.unsupported
            r.delegation = d
        if self.profile:
            r.op_profile = self.profile
        r.log = text
        return r


def _profile_row(row: dict[str, Any]) -> dict[str, Any]:
    """A table row in the JSON names our own profile uses."""
    names = {
        "node type": "node_type",
        "first": "first_ms",
        "avg ms": "avg_ms",
        "%": "pct",
        "cdf%": "cdf_pct",
        "mem kb": "mem_kb",
        "times called": "times_called",
        "start": "start_ms",
        "count": "count",
        "avg %": "avg_pct",
        "cdf %": "cdf_pct",
    }
    out = {names.get(k, k): v for k, v in row.items()}
    for key in ("times_called", "count"):
        if isinstance(out.get(key), float):
            out[key] = int(out[key])
    return out


def parse_benchmark_output(text: str) -> BenchmarkResult:
    """The official tool's stdout (any REFERENCE.md variant) as a BenchmarkResult.

    Raises BenchmarkParseError when the timed runs' statistics are missing.
    """
    parser = _Parser()
    for raw in text.splitlines():
        parser.feed(raw)
    return parser.finish(text)
