"""Our numpy CPU reference against LiteRT's single-thread interpreter, in one run.

    python bench/bench_cpu_reference.py [--model M.tflite] [--runs 30] [--warmup 5]

Prints the median latency of each (runs interleaved, so both see the same machine load),
the ratio ours/LiteRT (target: within 4x on MobileNet v1 1.0 224) and the largest output
difference. BLAS is held to one thread, as LiteRT is: on a busy machine a multi-threaded
BLAS is many times slower, not faster.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy is imported

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from delegate_runtime import litert, read_model  # noqa: E402
from delegate_runtime.interpreter import Interpreter  # noqa: E402

DEFAULT_MODEL = (
    Path(__file__).resolve().parents[2] / "shared/models/mobilenet_v1_1.0_224_fp32.tflite"
)
#: Ratio ours/LiteRT the CPU reference must stay within.
TARGET_RATIO = 4.0


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _random_inputs(details: list[dict], rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for d in details:
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            out.append(rng.uniform(-1, 1, d["shape"]).astype(dtype))
        else:
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max + 1, d["shape"]).astype(dtype))
    return out


def run(model_path: Path, runs: int, warmup: int) -> dict[str, float]:
    """Median seconds of ours and LiteRT over `runs` interleaved runs, their ratio, max diff."""
    data = model_path.read_bytes()
    ours = Interpreter(read_model(data))
    ref = litert.make_interpreter(data, num_threads=1)
    inputs = _random_inputs(ref.get_input_details(), np.random.default_rng(0))
    for d, x in zip(ref.get_input_details(), inputs, strict=True):
        ref.set_tensor(d["index"], x)

    def ours_once() -> list[np.ndarray]:
        return ours.invoke(inputs)

    for _ in range(warmup):
        ours_once()
        ref.invoke()
    t_ours, t_ref = [], []
    for _ in range(runs):
        t_ours.append(_timed(ours_once))
        t_ref.append(_timed(ref.invoke))
    got = ours_once()
    want = [ref.get_tensor(d["index"]) for d in ref.get_output_details()]
    diff = max(
        float(np.abs(g.astype(np.float64) - w).max()) for g, w in zip(got, want, strict=True)
    )
    ours_s, ref_s = float(np.median(t_ours)), float(np.median(t_ref))
    return {"ours_s": ours_s, "litert_s": ref_s, "ratio": ours_s / ref_s, "max_abs_diff": diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    r = run(a.model, a.runs, a.warmup)
    print(f"model: {a.model.name}  runs: {a.runs} (after {a.warmup} warm-up)")
    print(f"ours (numpy reference)  median {r['ours_s'] * 1e3:8.2f} ms")
    print(f"LiteRT (1 thread)       median {r['litert_s'] * 1e3:8.2f} ms")
    verdict = "within" if r["ratio"] <= TARGET_RATIO else "OVER"
    print(f"ratio ours/LiteRT       {r['ratio']:8.2f}x  ({verdict} the {TARGET_RATIO:g}x target)")
    print(f"max |ours - LiteRT|     {r['max_abs_diff']:.3g}")


if __name__ == "__main__":
    main()
