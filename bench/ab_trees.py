"""This tree's GPU delegate against a baseline tree's, on the same models in one call.

Each tree runs in its own process (the baseline's `delegate_runtime` imported from its own
folder: another checkout, or `git archive REV delegate_runtime | tar -x -C DIR`); the two
take turns in rounds, the order swapped every round, so that the host's state and the
GPU's clocks touch both alike. Per model: the median host-in to host-out of each tree,
the baseline's time over this tree's, each tree's launches, and the largest difference
between their outputs over the baseline output's range.

    python bench/ab_trees.py --baseline DIR MODEL_OR_DIR [...] [--runs 300] [--rounds 10]
        [--precision fp32] [--device SPEC]

Lent GPU machines differ from call to call (the same launches cost the host 190 us on one
and 333 us on another, docs/notebook/09-2026-11-25-what-a-launch-costs-the-host-a-squeeze-excite.md), so a before/after means something only when
measured in one call; this measures it without the LiteRT anchors of bench_zoo.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
WARMUP_INVOKES = 30  #: per tree and model, before the rounds


def serve(tree: str, precision: str, device: str | None) -> None:
    """The worker: JSON requests on stdin, one JSON reply line each on the original
    stdout (everything else the process prints goes to stderr)."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path.insert(0, tree)
    import gc
    import io
    import time

    import delegate_runtime
    from delegate_runtime import load_model
    from delegate_runtime.gpu.delegate import GpuSession

    imported = Path(delegate_runtime.__file__).resolve()
    if Path(tree).resolve() not in imported.parents:  # an installed copy came first
        raise SystemExit(f"the worker for {tree} imported {imported}")
    session: Any = None
    xs: list[np.ndarray] = []
    for line in sys.stdin:
        request = json.loads(line)
        reply: dict[str, Any]
        try:
            if request["op"] == "load":
                session = None
                gc.collect()
                with np.load(request["inputs"]) as data:
                    xs = [data[f"arr_{i}"] for i in range(len(data.files))]
                model = load_model(request["model"])
                session = GpuSession(model, precision=precision, device=device, log=io.StringIO())
                np.savez(request["outputs"], *session.invoke(xs))
                reply = {"launches": sum(len(ex.kernels) for ex in session.executors)}
            elif request["op"] == "run":
                times = []
                for _ in range(request["n"]):
                    t = time.perf_counter_ns()
                    session.invoke(xs)
                    times.append(time.perf_counter_ns() - t)
                reply = {"ns": times}
            else:
                reply = {"error": f"unknown request {request['op']!r}"}
        except Exception as exc:  # reported to the driver, which goes on with the next model
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


class Worker:
    """One tree's process."""

    def __init__(self, tree: Path, precision: str, device: str | None):
        cmd = [sys.executable, __file__, "--serve", str(tree), "--precision", precision]
        if device:
            cmd += ["--device", device]
        self.tree = tree
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker for {self.tree} exited ({self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def compare(
    model: str, workers: dict[str, Worker], runs: int, rounds: int, folder: Path
) -> dict[str, Any]:
    """One model through both trees: loads, warm-up, the rounds; the row to print."""
    sys.path.insert(0, str(REPO / "bench"))
    from bench_zoo import inputs_for, max_error

    row: dict[str, Any] = {"model": Path(model).stem}
    inputs = folder / "inputs.npz"
    try:
        np.savez(inputs, *inputs_for(model))
    except Exception as exc:  # named in the model's row; the other models go on
        row["error"] = f"inputs: {type(exc).__name__}: {exc}"
        return row
    outputs = {}
    for name, w in workers.items():
        out = folder / f"{name}.npz"
        reply = w.ask(op="load", model=model, inputs=str(inputs), outputs=str(out))
        if "error" in reply:
            row["error"] = f"{name}: {reply['error']}"
            return row
        row[f"{name} launches"] = reply["launches"]
        with np.load(out) as data:
            outputs[name] = [data[k] for k in sorted(data.files, key=lambda k: int(k[4:]))]
    times: dict[str, list[int]] = {name: [] for name in workers}
    for name, w in workers.items():
        reply = w.ask(op="run", n=WARMUP_INVOKES)
        if "error" in reply:
            row["error"] = f"{name}: {reply['error']}"
            return row
    order = list(workers)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            reply = workers[name].ask(op="run", n=max(runs // rounds, 1))
            if "error" in reply:
                row["error"] = f"{name}: {reply['error']}"
                return row
            times[name] += reply["ns"]
    for name, ts in times.items():
        row[f"{name} ms"] = statistics.median(ts) / 1e6
    row["diff"] = max_error(outputs["this tree"], outputs["baseline"])
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| model | launches (this / baseline) | this tree ms | baseline ms | baseline / this |"
          " max diff (of range) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    ratios = []
    for row in rows:
        if "error" in row:
            print(f"| {row['model']} | {row['error']} | | | | |")
            continue
        ratio = row["baseline ms"] / row["this tree ms"]
        ratios.append(ratio)
        print(
            f"| {row['model']} | {row['this tree launches']} / {row['baseline launches']} | "
            f"{row['this tree ms']:.3f} | {row['baseline ms']:.3f} | {ratio:.3f}x | "
            f"{row['diff']:.1e} |"
        )
    if ratios:
        mean = float(np.exp(np.mean(np.log(ratios))))
        print(f"geometric mean, baseline / this tree: {mean:.3f}x ({len(ratios)} models)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", help=".tflite files or folders of them")
    ap.add_argument("--baseline", help="the other tree's folder (holding delegate_runtime/)")
    ap.add_argument("--runs", type=int, default=300, help="timed invokes per tree and model")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--serve", help=argparse.SUPPRESS)  # a worker for this tree folder
    a = ap.parse_args()
    if a.serve:
        serve(a.serve, a.precision, a.device)
        return 0
    if not a.baseline or not a.models:
        ap.error("give --baseline DIR and at least one model")
    baseline = Path(a.baseline).resolve()
    if not (baseline / "delegate_runtime").is_dir():
        ap.error(f"{baseline} holds no delegate_runtime/")
    sys.path.insert(0, str(REPO / "bench"))
    from bench_zoo import model_paths

    trees = {"this tree": REPO, "baseline": baseline}
    workers = {name: Worker(tree, a.precision, a.device) for name, tree in trees.items()}
    try:
        with tempfile.TemporaryDirectory() as folder:
            rows = []
            for model in model_paths(a.models):
                rows.append(compare(model, workers, a.runs, a.rounds, Path(folder)))
                print(f"# {rows[-1]['model']} done", file=sys.stderr, flush=True)
    finally:
        for w in workers.values():
            w.close()
    print(f"## {a.precision}, median of {a.runs} per tree, {a.rounds} rounds; baseline {baseline}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
