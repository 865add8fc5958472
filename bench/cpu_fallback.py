"""The GPU delegate's CPU nodes on LiteRT's CPU runtime against our reference interpreter
(gpu/cpu_runs.py), beside LiteRT's CPU interpreter running the whole model (issue 40).

Per model: our GPU path with its CPU runs on LiteRT (the default) and on the reference,
and LiteRT's CPU interpreter at N threads, measured interleaved in one process (median
host in to host out); the ratios are LiteRT CPU's time over each of ours (above 1: ours
is faster).

    python bench/cpu_fallback.py MODEL [...] [--runs 300] [--threads 16] [--max-partitions N]

`--max-partitions` (TFLite's max_delegated_partitions, default 1) leaves more nodes on the
CPU, as a phone's delegate does with a model it takes in pieces.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import interleaved_ms  # noqa: E402
from bench_zoo import inputs_for, litert_cpu, max_error, reference  # noqa: E402


def main() -> int:
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--max-partitions", type=int, default=1)
    a = ap.parse_args()
    cpu = f"LiteRT CPU {a.threads} thr"
    print(
        f"| model | nodes on the CPU | GPU + LiteRT CPU runs ms | GPU + reference ms | {cpu} ms "
        "| LiteRT CPU / ours (LiteRT runs) | LiteRT CPU / ours (reference) | err (LiteRT runs) |"
    )
    print("| --- " * 8 + "|")
    for path in a.models:
        xs = inputs_for(path)
        want = reference(path, xs)
        steps, errs, left = {}, {}, 0
        for runtime in ("litert", "reference"):
            s = GpuSession(
                load_model(path),
                cpu_runtime=runtime,
                max_delegated_partitions=a.max_partitions,
                log=io.StringIO(),
            )
            left = s.delegation.total_nodes - s.delegation.delegated_nodes
            steps[runtime] = lambda s=s, xs=xs: s.invoke(xs)
            errs[runtime] = max_error(s.invoke(xs), want)
        steps[cpu], _ = litert_cpu(path, xs, a.threads)
        ms = {k: v[0] for k, v in interleaved_ms(steps, a.runs).items()}
        print(
            f"| {Path(path).stem} | {left} | {ms['litert']:.3f} | {ms['reference']:.3f} | "
            f"{ms[cpu]:.3f} | {ms[cpu] / ms['litert']:.2f}x | {ms[cpu] / ms['reference']:.2f}x "
            f"| {errs['litert']:.1e} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
