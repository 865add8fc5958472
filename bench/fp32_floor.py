"""How far a model's fp32 output moves when its input moves by one ulp, in LiteRT's own
reference kernels: the floor under which two fp32 runtimes cannot be told apart (issue 14).

For each model, bench_zoo's input x and LiteRT's reference kernels' output for it; then
for each seed, x with a random third of its elements one ulp up, a third one ulp down,
through the same kernels; the largest change over the output's range (bench_zoo's
max_error). A runtime that only sums in another order is an input perturbation of about
this size at every layer, so its error against the reference kernels is at least of
this order; XNNPACK's at 1 and 16 threads beside it. A model with custom ops (no
reference kernels) is measured through XNNPACK at 16 threads instead.

    python bench/fp32_floor.py MODEL [...] [--seeds 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_zoo  # noqa: E402


def nudged(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """x with each float element moved one ulp up, one down or left, at random."""
    if x.dtype.kind != "f":
        return x
    step = rng.integers(-1, 2, x.shape)
    toward = np.where(step > 0, np.inf, -np.inf).astype(x.dtype)
    moved = np.nextafter(x, toward)
    return np.where(step == 0, x, moved).astype(x.dtype)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    print("| model | reference vs itself, inputs one ulp apart | XNNPACK 1 thr | XNNPACK 16 thr |")
    print("| --- | --- | --- | --- |")
    for path in bench_zoo.model_paths(a.models):
        xs = bench_zoo.inputs_for(path)
        try:
            run = bench_zoo.reference
            want = run(path, xs)
            name = Path(path).stem
        except Exception:  # noqa: BLE001 - a custom op: XNNPACK is the reference, as in bench_zoo

            def run(p: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
                return list(bench_zoo.litert_cpu(p, inputs, 16)[1])

            want = run(path, xs)
            name = f"{Path(path).stem} (no reference kernels: XNNPACK 16 thr vs itself)"
        moves = []
        for seed in range(a.seeds):
            rng = np.random.default_rng(seed)
            moved = run(path, [nudged(x, rng) for x in xs])
            moves.append(bench_zoo.max_error(moved, want))
        xnn = [
            bench_zoo.max_error(list(bench_zoo.litert_cpu(path, xs, t)[1]), want) for t in (1, 16)
        ]
        floor = ", ".join(f"{m:.1e}" for m in moves)
        print(f"| {name} | {floor} | {xnn[0]:.1e} | {xnn[1]:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
