"""LiteRT's GPU accelerator and ours, error per output on the real-model tier's cases (issue 13).

For every MediaPipe model of tests/models and every Keras file built here (NAME__VARIANT,
e.g. MobileNetV2__int8), on exactly the inputs and goldens that tier uses
(labkit/zoo_cases.py: `mediapipe_case`, `keras_case`, `golden`; the CPU reference
where LiteRT cannot run the model), per output: max |out - golden| over the golden's scale
(zoo_cases.output_scale: its range). Runtimes: LiteRT's GPU accelerator (`CompiledModel`,
GPU) at its default precision (fp16) and with `enforce_f32`, and ours in fp16 and fp32.

    python bench/zoo_fp16_error.py [--device NVIDIA] [--inputs N] [--json OUT] [NAME ...]

With `--inputs N` every runtime also runs N - 1 more input sets drawn as the tier's are
(seeds LABEL#errK) against their own goldens, and the table gives, per output, the median
over the N inputs with the first input's figure in brackets: on one input, two runtimes
with the same rounding noise land either way of each other (a softmax turns the noise on
its few top logits into the output's largest error).

The per-output figures of LiteRT's GPU accelerator are what test_zoo.LITERT_GPU_FP16_ERROR
(default precision) and test_zoo.LITERT_GPU_FP32_ERROR (enforce_f32, int8 files) hold
(docs/models.md).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from labkit import zoo  # noqa: E402
from labkit.zoo_cases import (  # noqa: E402
    ZooCase,
    golden,
    goldens,
    keras_case,
    mediapipe_case,
    output_scale,
)
from labkit.zoo_cases import input_sets as draw_sets  # noqa: E402

LITERT_FP16, LITERT_FP32 = "LiteRT GPU fp16", "LiteRT GPU enforce_f32"
RUNTIMES = (LITERT_FP16, LITERT_FP32, "ours fp16", "ours fp32")


def litert_gpu(
    case: ZooCase, enforce_f32: bool, input_sets: list[list[np.ndarray]]
) -> tuple[list[list[np.ndarray]], bool]:
    """Outputs of LiteRT's GPU accelerator in the model's output order for each input set,
    and whether it took the whole model (where it refuses some ops, they run on LiteRT's
    CPU kernels)."""
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import GpuOptions, Options

    gpu = GpuOptions(enforce_f32=enforce_f32)
    try:
        model = CompiledModel.from_file(
            str(case.path), options=Options(HardwareAccelerator.GPU, gpu_options=gpu)
        )
    except RuntimeError as exc:  # ops it cannot take (DENSIFY): those on its CPU kernels
        if "not accelerated" not in str(exc):
            raise
        both = HardwareAccelerator.GPU | HardwareAccelerator.CPU
        model = CompiledModel.from_file(str(case.path), options=Options(both, gpu_options=gpu))
    key = list(model.get_signature_list())[0]
    in_details = model.get_input_tensor_details(key)
    out_details = model.get_output_tensor_details(key)
    ins, outs = model.create_input_buffers(0), model.create_output_buffers(0)
    sg = case.model.main
    stored = next((sig for sig in case.model.signatures if sig.key == key), None)
    in_names = graph_order(sg, sg.inputs, stored.inputs if stored else None)
    out_names = graph_order(sg, sg.outputs, stored.outputs if stored else None)
    results = []
    for inputs in input_sets:
        by_name = dict(zip(signature_order(in_names, in_details), inputs, strict=True))
        for buf, name in zip(ins, in_details, strict=True):
            buf.write(np.ascontiguousarray(by_name[name]))
        model.run_by_index(0, ins, outs)
        got = {
            name: buf.read(int(np.prod(d["shape"])), np.dtype(d["dtype"])).reshape(d["shape"])
            for buf, (name, d) in zip(outs, out_details.items(), strict=True)
        }
        results.append([got[n] for n in signature_order(out_names, out_details)])
    return results, model.is_fully_accelerated()


def graph_order(sg, tensors: tuple[int, ...], stored: dict[str, int] | None) -> list[str]:
    """The graph's inputs or outputs by the names the model's signature gives their tensors
    (the converter names a Keras model's `output_0`, `output_1` in its own order, which need
    not be the graph's: TextGRU's class comes first in the graph); tensor names where the
    model has no signature (MediaPipe)."""
    if stored:
        by_tensor = {index: name for name, index in stored.items()}
        if all(t in by_tensor for t in tensors):
            return [by_tensor[t] for t in tensors]
    return [sg.tensors[t].name for t in tensors]


def signature_order(tensor_names: list[str], signature: dict) -> list[str]:
    """The signature's names in the graph's order: by name where the signature uses the
    graph's (MediaPipe's tensor names, or the model's own signature names), else by
    position."""
    names = list(signature)
    if set(tensor_names) <= set(names):
        return tensor_names
    if len(names) != len(tensor_names):
        raise ValueError(f"signature {names} does not match graph tensors {tensor_names}")
    return names


def ours(
    case: ZooCase, precision: str, device: str | None, input_sets: list[list[np.ndarray]]
) -> list[list[np.ndarray]]:
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(case.model, precision=precision, device=device, log=io.StringIO())
    return [session.invoke(inputs) for inputs in input_sets]


def errors(got: list[np.ndarray], want: list[np.ndarray]) -> list[float]:
    """Per output, max |got - want| over output_scale(want)."""
    return [
        float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max()) / output_scale(w)
        for g, w in zip(got, want, strict=True)
    ]


def zoo_case(name: str) -> ZooCase:
    """A MediaPipe model by name, or a Keras file by NAME__VARIANT."""
    if "__" in name:
        return keras_case(*name.split("__"))
    return mediapipe_case(name)


def measure(name: str, device: str | None, n_inputs: int = 1) -> dict:
    """Per runtime, per input set, per output: the error (or why the runtime failed)."""
    case = zoo_case(name)
    gold = golden(case)
    input_sets = draw_sets(case, n_inputs)
    wants = goldens(case, input_sets)
    row: dict = {"golden": gold.kernels or "CPU reference (LiteRT cannot run it)"}
    noise = gold.noise or [0.0] * len(wants[0])
    row["noise"] = [n / output_scale(w) for n, w in zip(noise, wants[0], strict=True)]
    makers = {
        LITERT_FP16: lambda: litert_gpu(case, False, input_sets),
        LITERT_FP32: lambda: litert_gpu(case, True, input_sets),
        "ours fp16": lambda: (ours(case, "fp16", device, input_sets), True),
        "ours fp32": lambda: (ours(case, "fp32", device, input_sets), True),
    }
    for runtime, make in makers.items():
        try:
            got, full = make()
            row[runtime] = [errors(g, w) for g, w in zip(got, wants, strict=True)]
            if not full:
                row[f"{runtime} partial"] = True
        except Exception as exc:  # noqa: BLE001 - the table reports it and goes on
            row[runtime] = f"{type(exc).__name__}: " + " ".join(str(exc).split())[:300]
    return row


def cell(value: object) -> str:
    """Per output the median over the input sets, with the first set's figure in brackets
    when there are several."""
    if not isinstance(value, list):
        return f"fails ({value})"
    if len(value) == 1:
        return " ".join(f"{v:.1e}" for v in value[0])
    medians = np.median(np.array(value), axis=0)
    return " ".join(f"{m:.1e} ({v:.1e})" for m, v in zip(medians, value[0], strict=True))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "names",
        nargs="*",
        help="MediaPipe models or Keras NAME__VARIANT (default: MediaPipe's and the Keras files here)",
    )
    ap.add_argument("--device", default=None, help="OpenCL device of ours (default: the first)")
    ap.add_argument(
        "--inputs", type=int, default=1, help="input sets per model (default 1: the tier's)"
    )
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args()
    rows = {}
    keras = [f"{n}__{v}" for n, v in zoo.KERAS_MODELS if zoo.keras_model(n, v) is not None]
    for name in a.names or [*zoo.MEDIAPIPE_MODELS, *keras]:
        rows[name] = measure(name, a.device, a.inputs)
        print(f"  {name}: {json.dumps(rows[name])}", flush=True)
    over = f", median over {a.inputs} inputs (first input)" if a.inputs > 1 else ""
    print(f"\nper output, max |out - golden| / golden's range{over}\n")
    print("| model | " + " | ".join(RUNTIMES) + " | LiteRT GPU whole model |")
    print("| --- " * (len(RUNTIMES) + 2) + "|")
    for name, row in rows.items():
        partial = [r for r in (LITERT_FP16, LITERT_FP32) if row.get(f"{r} partial")]
        whole = "no (" + ", ".join(partial) + ")" if partial else "yes"
        print(f"| {name} | " + " | ".join(cell(row[r]) for r in RUNTIMES) + f" | {whole} |")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
