"""Parse inference_diff's `run_eval` output into the record our own diff produces."""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from delegate_runtime.tools.benchmark import RunStats
from delegate_runtime.tools.benchmark_parser import BenchmarkParseError, strip_prefix

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
_RUNS = re.compile(r"^Num evaluation runs: (\d+)")
_LATENCY = re.compile(rf"^(Reference|Test) run latency: avg=({_NUM})\(us\), std_dev=({_NUM})\(us\)")
_OUTPUT = re.compile(rf"^OutputDiff\[(\d+)\]: avg_error=({_NUM}), std_dev=({_NUM})")


def parse_diff_output(text: str) -> dict[str, Any]:
    """The figures of run_eval's lines; BenchmarkParseError when no output diff is there."""
    runs = 0
    latency: dict[str, RunStats] = {}
    outputs = []
    for raw in text.splitlines():
        line = strip_prefix(raw.strip())
        if m := _RUNS.match(line):
            runs = int(m.group(1))
        elif m := _LATENCY.match(line):
            latency[m.group(1)] = RunStats(
                count=runs, avg_us=float(m.group(2)), std_us=int(float(m.group(3)))
            )
        elif m := _OUTPUT.match(line):
            outputs.append(
                {
                    "index": int(m.group(1)),
                    "name": None,
                    "avg_error": float(m.group(2)),
                    "std_dev": float(m.group(3)),
                    "max_error": None,
                    "worst": None,
                    "per_run_errors": [],
                }
            )
    if not outputs:
        raise BenchmarkParseError("incomplete run_eval output: no OutputDiff lines")
    return {
        "source": "run_eval",
        "model_path": "",
        "num_runs": runs,
        "seed": None,
        "reference": "TFLite CPU (run_eval)",
        "test": "TFLite delegate (run_eval)",
        "reference_latency": asdict(latency.get("Reference", RunStats())),
        "test_latency": asdict(latency.get("Test", RunStats())),
        "outputs": outputs,
        "delegation": None,
        "device": {},
        "versions": {},
        "options": {},
        "notes": [],
        "log": text,
    }
