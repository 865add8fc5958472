"""Where each node of a model would run on a GPU at the shipped defaults, without a GPU:
the delegate's partitions, what the placement rule leaves to the CPU (gpu/placement.py, at
its GPU default), and each CPU run's runtime, LiteRT's or the reference's and why
(gpu/cpu_runs.py, gpu/cpu_run_bounds.py). Nothing is compiled or timed.

    python bench/tier_cpu_runs.py MODEL_OR_FOLDER... [--input_layer NAME --input_layer_shape 1,1760]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from delegate_runtime import load_model  # noqa: E402
from delegate_runtime.gpu import placement  # noqa: E402
from delegate_runtime.gpu.cpu_runs import plan_cpu_runs  # noqa: E402
from delegate_runtime.gpu.fold import fold_constants  # noqa: E402
from delegate_runtime.gpu.partition import partition  # noqa: E402
from delegate_runtime.gpu.support import SupportOptions  # noqa: E402
from delegate_runtime.gpu.switches import DEFAULTS  # noqa: E402
from delegate_runtime.static_shapes import with_input_shapes  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument(
        "--input_layer", default="", help="an input with a placeholder dimension, by name"
    )
    parser.add_argument("--input_layer_shape", default="", help="its shape: 1,1760")
    a = parser.parse_args(argv)
    paths = [p for m in a.models for p in (sorted(m.glob("*.tflite")) if m.is_dir() else [m])]
    resize = (
        {a.input_layer: tuple(int(d) for d in a.input_layer_shape.split(","))}
        if a.input_layer
        else {}
    )
    print(
        "| model | GPU nodes (supported) | left to the CPU as small | CPU runs | on the reference |"
    )
    print("| --- | --- | --- | --- | --- |")
    for path in paths:
        model = load_model(path)
        dynamic = {  # inputs declared with a placeholder dimension (-1) take the shape
            model.main.tensors[t].name
            for t in model.main.inputs
            if -1 in (model.main.tensors[t].shape_signature or ())
        }
        wanted = {n: s for n, s in resize.items() if n in dynamic}
        model = with_input_shapes(model, wanted) if wanted else model
        model, _ = fold_constants(model, DEFAULTS.max_folded_elements)
        supported = partition(model.main, SupportOptions(), 1)
        placed = placement.keep_small_on_cpu(supported, model.main, DEFAULTS.min_gpu_work)
        runs = plan_cpu_runs(
            model, placed.partitions, log=io.StringIO(), small_work=DEFAULTS.min_gpu_work,
            trial_min_pool=DEFAULTS.cpu_thread_trial_min_pool,
        )  # fmt: skip
        reference = "; ".join(
            f"nodes {r.nodes[0]}-{r.nodes[-1]}: {r.why_reference[:80]}"
            for r in runs
            if r.runtime != "litert"
        )
        print(
            f"| {path.stem} | {placed.delegated_nodes}/{supported.total_nodes} "
            f"({supported.delegated_nodes}) | {placed.nodes_below_min_work} | {len(runs)} | "
            f"{reference or '-'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
