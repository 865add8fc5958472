"""LiteRT's CPU runtime on a model as an app runs it (inputs set, invoke, outputs read), on
every usable CPU, in a process of its own as a farm job is:

    python tests/gpu_machine/litert_cpu.py MODEL [RUNS]

prints {"median_us": ..., "threads": ...}. The inputs are the ones a farm job times
(delegate_runtime.tools.benchmark's, same seed): a model with control flow (openWakeWord's
heads end in an IF) runs another branch on zeros.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from delegate_runtime import litert
from delegate_runtime.host_cpus import usable_cpus
from delegate_runtime.reader import load_model
from delegate_runtime.tools.benchmark import INPUT_SEED, benchmark_inputs

WARM_UP = 200


def median_us(model: Path, runs: int) -> dict[str, float]:
    threads = usable_cpus()
    it = litert.make_interpreter(model.read_bytes(), threads)
    values = benchmark_inputs(load_model(model), np.random.default_rng(INPUT_SEED))
    feeds = list(zip((d["index"] for d in it.get_input_details()), values, strict=True))
    outs = [d["index"] for d in it.get_output_details()]
    times = []
    for i in range(runs + WARM_UP):
        start = time.perf_counter()
        for index, x in feeds:
            it.set_tensor(index, x)
        it.invoke()
        for index in outs:
            it.get_tensor(index)
        if i >= WARM_UP:
            times.append(time.perf_counter() - start)
    return {"median_us": float(np.median(times)) * 1e6, "threads": threads}


if __name__ == "__main__":
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    print(json.dumps(median_us(Path(sys.argv[1]), runs)))
