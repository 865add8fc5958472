"""The integer codes a launch passes to its kernel, from one table.

Python reads them as enums (`Unary.RELU`), the kernels as #defines (`UNARY_RELU`) written
by `opencl_defines()` at the top of the program, so the two sides cannot drift apart. A
kernel switch over a code has no case for an unknown value: it poisons the result (NaN).
"""

from __future__ import annotations

from enum import IntEnum

#: name prefix in OpenCL -> the codes in order (position = value), or explicit values.
TABLE: dict[str, dict[str, int]] = {
    # elementwise kernel `unary`
    "UNARY": {
        name: i
        for i, name in enumerate(
            (
                "RELU",
                "RELU6",
                "RELU_N1_TO_1",
                "LOGISTIC",
                "TANH",
                "EXP",
                "HARD_SWISH",
                "RSQRT",
                "SQRT",
                "COPY",
                "ABS",
                "NEG",
                "SIN",
                "COS",
                "LOG",
                "FLOOR",
                "SIGN",
                "SQUARE",
                "ELU",
                "GELU",
                "GELU_TANH",
                "RELU_0_TO_1",
                "LEAKY_RELU",
                "TRUNC",
                "NOT_ZERO",
            )
        )
    },
    # elementwise kernel `binary4d`
    "BINARY": {
        name: i
        for i, name in enumerate(
            (
                "ADD",
                "SUB",
                "MUL",
                "DIV",
                "MAXIMUM",
                "MINIMUM",
                "SQUARED_DIFFERENCE",
                "PRELU",
                "LOGICAL_AND",
                "POW",
                "FLOOR_DIV",
                "FLOOR_MOD",
                "EQUAL",
                "NOT_EQUAL",
                "GREATER",
                "GREATER_EQUAL",
                "LESS",
                "LESS_EQUAL",
            )
        )
    },
    # TFLite's fused activation codes (ActivationFunctionType; SIGMOID is kTfLiteActSigmoid)
    "ACT": {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4, "SIGMOID": 6},
    # pool2d's kind
    "POOL": {"AVERAGE": 0, "MAX": 1},
    # an epilogue step: an elementwise op fused into the kernel producing its input
    "STEP": {
        name: i
        for i, name in enumerate(
            (
                "NONE",
                "RELU",
                "RELU6",
                "RELU_N1_TO_1",
                "LOGISTIC",
                "TANH",
                "HARD_SWISH",
                "SWISH",
                "ADD",
                "SUB",
                "RSUB",
                "MUL",
                "PRELU",
                "QDQ",
                "SWISH_QDQ",
            )
        )
    },
    # where a step's operand comes from: a scalar argument, one value per channel (the
    # last axis), or one per output element
    "FROM": {"SCALAR": 0, "CHANNEL": 1, "TENSOR": 2},
    # reduce4d's reduction (SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD)
    "REDUCE": {"SUM": 0, "MAX": 1, "MIN": 2, "PROD": 3},
}

Unary = IntEnum("Unary", TABLE["UNARY"])
Binary = IntEnum("Binary", TABLE["BINARY"])
Act = IntEnum("Act", TABLE["ACT"])
Pool = IntEnum("Pool", TABLE["POOL"])
Step = IntEnum("Step", TABLE["STEP"])
From = IntEnum("From", TABLE["FROM"])
Reduce = IntEnum("Reduce", TABLE["REDUCE"])


def opencl_defines() -> str:
    """The table as OpenCL #defines (`#define UNARY_RELU 0`)."""
    return "".join(
        f"#define {prefix}_{name} {value}\n"
        for prefix, codes in TABLE.items()
        for name, value in codes.items()
    )
