"""docs/gpu_ops.md: the ops LiteRT's GPU delegate parses beside the ops ours takes.

LiteRT's side is the list of builtin ops and custom op names that `NewOperationParser` in
tflite/delegates/gpu/common/model_builder.cc maps to a parser (LITERT_COMMIT below); ours
is the delegate's record registry (delegate_runtime/gpu/opencl/records/), with each record's
versions. Deliberate differences are DIFFERENCES below, each said once.

    python scripts/gpu_ops_table.py                 # print the table
    python scripts/gpu_ops_table.py --write         # write docs/gpu_ops.md
    python scripts/gpu_ops_table.py --model-builder PATH/model_builder.cc   # re-read LiteRT
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DOC = REPO / "docs" / "gpu_ops.md"
#: google-ai-edge/LiteRT, the commit whose model_builder.cc the lists below were read from.
LITERT_COMMIT = "f67457790"
#: The builtin ops NewOperationParser maps to a parser (its `case kTfLiteBuiltin...:`).
LITERT_BUILTINS = (
    "ABS", "ADD", "ADD_N", "AVERAGE_POOL_2D", "BATCH_MATMUL", "CAST", "CONCATENATION",
    "CONV_2D", "COS", "CUMSUM", "DENSIFY", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE",
    "DEQUANTIZE", "DIV", "EQUAL", "ELU", "EXP", "FLOOR", "FLOOR_DIV", "FLOOR_MOD",
    "FULLY_CONNECTED", "GATHER", "GELU", "GREATER", "GREATER_EQUAL", "HARD_SWISH", "LESS",
    "LESS_EQUAL", "LOGISTIC", "LOG", "LOGICAL_AND", "LSTM", "MAXIMUM", "MAX_POOL_2D", "MEAN",
    "MINIMUM", "MIRROR_PAD", "MUL", "NEG", "NOT_EQUAL", "ONE_HOT", "PACK", "PAD", "PADV2",
    "POW", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "QUANTIZE", "RELU", "RELU6",
    "RELU_0_TO_1", "RELU_N1_TO_1", "LEAKY_RELU", "PRELU", "RESHAPE", "RESIZE_BILINEAR",
    "RESIZE_NEAREST_NEIGHBOR", "RSQRT", "SELECT", "SELECT_V2", "SIGN", "SIN", "SLICE",
    "SOFTMAX", "SPACE_TO_DEPTH", "SPLIT", "SPLIT_V", "SQRT", "SQUARE", "SQUARED_DIFFERENCE",
    "STRIDED_SLICE", "SUB", "SUM", "TANH", "TILE", "TRANSPOSE", "TRANSPOSE_CONV", "UNPACK",
)  # fmt: skip
#: The custom ops it parses (`custom_name == "..."`). Others go to NewCustomOperationParser,
#: whose default build (tflite/delegates/gpu/common/default/custom_parsers.cc) refuses
#: them all; MediaPipe links its own, taking its three (MEDIAPIPE_CUSTOMS).
LITERT_CUSTOMS = (
    "Convolution2DTransposeBias",
    "MaxPoolingWithArgmax2D",
    "MaxUnpooling2D",
    "Resampler",
)
MEDIAPIPE_CUSTOMS = ("Landmarks2TransformMatrix", "TransformLandmarks", "TransformTensorBilinear")
#: op -> what differs between LiteRT's delegate and ours, deliberately.
DIFFERENCES = {
    "ADD_N": "ours: any number of inputs (LiteRT: 2)",
    "BATCH_MATMUL": "ours honours adj_x/adj_y, takes a constant of any rank and one tensor "
    "read twice (LiteRT ignores the adjoints and crashes on x @ x^T)",
    "CUMSUM": "ours honours exclusive, reverse and negative axes (LiteRT's parser ignores them)",
    "DENSIFY": "folded at init: our reader densifies sparse constants (gpu/fold.py)",
    "DIV": "any broadcast up to 4-D (LiteRT's rule binds only ADD and MUL)",
    "MAXIMUM": "any broadcast up to 4-D",
    "MINIMUM": "any broadcast up to 4-D",
    "SUB": "any broadcast up to 4-D",
    "SQUARED_DIFFERENCE": "any broadcast up to 4-D",
    "POW": "any broadcast up to 4-D",
    "FLOOR_DIV": "any broadcast up to 4-D",
    "FLOOR_MOD": "any broadcast up to 4-D",
    "EQUAL": "a bool output may leave the partition (LiteRT: only into CAST or SELECT)",
    "NOT_EQUAL": "as EQUAL",
    "GREATER": "as EQUAL",
    "GREATER_EQUAL": "as EQUAL",
    "LESS": "as EQUAL",
    "LESS_EQUAL": "as EQUAL",
    "SELECT_V2": "any broadcast of cond, x and y up to 4-D (LiteRT: scalar or full shapes)",
    "SELECT": "as SELECT_V2; the TF1 row form (a rank-1 cond) stays on the CPU",
    "MIRROR_PAD": "ours takes SYMMETRIC too, and ranks 1-4 (LiteRT: REFLECT, 3-D and 4-D)",
    "PADV2": "ranks 1-4 (LiteRT: 3-D and 4-D)",
    "ONE_HOT": "any axis and indices shape (LiteRT: the last axis, one index per batch)",
    "SPLIT": "a runtime axis stays on the CPU (LiteRT reads it as a constant)",
    "SPLIT_V": "as SPLIT",
    "SUM": "sums in float in fp16 storage (LiteRT's fp16 channel SUM was 77 % off)",
    "EXPAND_DIMS": "ours only: a shared buffer, as RESHAPE (LiteRT splits a partition there)",
    "SQUEEZE": "ours only: as EXPAND_DIMS",
    "CUSTOM:Resampler": "not taken: no CPU kernel in LiteRT to test one against, and no "
    "model of the tier uses it",
    **{
        f"CUSTOM:{c}": "MediaPipe's build of the delegate takes it (custom_parsers.cc), as ours"
        for c in MEDIAPIPE_CUSTOMS
    },
}


def litert_ops(model_builder: Path) -> tuple[list[str], list[str]]:
    """The builtin and custom ops model_builder.cc's NewOperationParser maps to a parser."""
    import tflite

    text = model_builder.read_text()
    body = text[text.index("NewOperationParser(") : text.index("GetOpsToReplace")]
    by_key = {n.replace("_", "").lower(): n for n in vars(tflite.BuiltinOperator)}
    cases = re.findall(r"case kTfLiteBuiltin(\w+):", body)
    builtins = [by_key[c.lower()] for c in cases if c != "Custom"]
    return builtins, re.findall(r'custom_name == "(\w+)"', body)


def _versions(v: tuple[int, ...]) -> str:
    if not v:
        return "-"
    return f"v{v[0]}" if len(v) == 1 else f"v{v[0]}-{v[-1]}"


def table() -> str:
    from delegate_runtime.gpu.opencl.records import REGISTRY

    theirs = {*LITERT_BUILTINS, *(f"CUSTOM:{c}" for c in LITERT_CUSTOMS)}
    names = sorted(theirs | set(REGISTRY))
    lines = [
        "# GPU ops: LiteRT's delegate and ours",
        "",
        "Generated by `python scripts/gpu_ops_table.py --write` from our delegate's records",
        "(`delegate_runtime/gpu/opencl/records/`) and the ops that `NewOperationParser` in LiteRT's",
        f"`tflite/delegates/gpu/common/model_builder.cc` (google-ai-edge/LiteRT {LITERT_COMMIT})",
        "maps to a parser; a test keeps this file in step with both. Each op's own conditions",
        "are its record's `check`, with TFLite's wording where it refuses; each is tested in",
        "fp32 and fp16 against LiteRT's reference kernels (tests/ops/test_gpu_*.py).",
        "",
        "| op | LiteRT's delegate | ours: float | ours: quantized | difference |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in names:
        record = REGISTRY.get(name)
        float_v = _versions(record.rule.float_versions) if record else "not taken"
        quant_v = _versions(record.rule.quant_versions) if record else "-"
        lines.append(
            f"| {name} | {'parsed' if name in theirs else '-'} | {float_v} | {quant_v} | "
            f"{DIFFERENCES.get(name, '')} |"
        )
    taken = sum(1 for n in theirs if n in REGISTRY or n == "DENSIFY")
    lines += [
        "",
        f"LiteRT's delegate parses {len(theirs)} ops; ours takes {taken} of them "
        f"(DENSIFY by folding), and {len(set(REGISTRY) - theirs)} more that it does not parse.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(REPO)}")
    ap.add_argument("--model-builder", type=Path, help="re-read LiteRT's lists from this file")
    a = ap.parse_args()
    if a.model_builder:
        builtins, customs = litert_ops(a.model_builder)
        missing = sorted(set(builtins) ^ set(LITERT_BUILTINS))
        custom_missing = sorted(set(customs) - set(LITERT_CUSTOMS))
        print(f"builtins differing from LITERT_BUILTINS: {missing or 'none'}")
        print(f"customs missing from LITERT_CUSTOMS: {custom_missing or 'none'}")
        return 1 if missing or custom_missing else 0
    text = table()
    if a.write:
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(REPO)}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
