"""The GPU delegate's support rules (REFERENCE.md) and the reasons they give, TFLite's wording."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.gpu.support import (
    NOT_SUPPORTED,
    RULES,
    TYPE_SHAPE,
    SupportOptions,
    supports,
)

QUANT_ON = SupportOptions(enable_quant=True)
QUANT_OFF = SupportOptions(enable_quant=False)
Q = Quant(0.05, 0)


def one_op(op, operands, out_shape, out_dtype=np.float32, out_quant=None, version=1, **options):
    """A one-op model read back; operands are (shape, dtype[, quant]) inputs or arrays."""
    b = ModelBuilder()
    g = b.main
    ids = []
    for i, o in enumerate(operands):
        if isinstance(o, np.ndarray):
            ids.append(g.const(f"c{i}", o))
        else:
            shape, dtype, *quant = o
            ids.append(g.input(f"in{i}", shape, dtype, quant=quant[0] if quant else None))
    y = g.tensor("y", out_shape, out_dtype, quant=out_quant)
    g.op(op, ids, [y], version=version, **options)
    g.output(y)
    # unvalidated: some cases are models the reader refuses (stride 0), whose GPU reasons
    # TFLite's delegate still gives
    sg = read_model(b.build(), validate=False).main
    return sg.operators[0], sg


def check(op_sg, opts=QUANT_ON):
    return supports(*op_sg, opts)


F = np.float32
X4 = ((1, 4, 5, 3), F)


def conv_op(version=1, act="NONE", **kw):
    w = np.ones((2, 3, 3, 3), F)
    options = dict(padding="SAME", stride_h=1, stride_w=1, fused_activation_function=act)
    options.update(kw)
    return one_op("CONV_2D", [X4, w, np.zeros(2, F)], (1, 4, 5, 2), version=version, **options)


# -- whole-op rules ----------------------------------------------------------------------------


def test_unknown_op_is_not_supported():
    op = one_op("CEIL", [X4], (1, 4, 5, 3))  # LiteRT's delegate parses no CEIL
    assert check(op) == (False, NOT_SUPPORTED)
    assert NOT_SUPPORTED == "Operation is not supported."


#: Ops LiteRT's delegate does not parse (model_builder.cc's NewOperationParser), nor ours.
@pytest.mark.parametrize("op", ["CEIL", "ROUND", "ARG_MAX", "TOPK_V2", "SEGMENT_SUM"])
def test_ops_outside_the_list_are_not_supported(op):
    assert op not in RULES


def test_every_reference_md_op_is_in_the_rules():
    listed = [
        "ADD",
        "AVERAGE_POOL_2D",
        "CONCATENATION",
        "CONV_2D",
        "DEPTHWISE_CONV_2D",
        "EXP",
        "FULLY_CONNECTED",
        "LOGICAL_AND",
        "LOGISTIC",
        "MAX_POOL_2D",
        "MAXIMUM",
        "MINIMUM",
        "MUL",
        "PAD",
        "PRELU",
        "RELU",
        "RELU6",
        "RESHAPE",
        "RESIZE_BILINEAR",
        "SOFTMAX",
        "STRIDED_SLICE",
        "SUB",
        "TRANSPOSE_CONV",
        "MEAN",
        "TRANSPOSE",
        "SLICE",
        "SPACE_TO_DEPTH",
        "DEQUANTIZE",
    ]
    assert set(listed) <= set(RULES)


@pytest.mark.parametrize(
    "op,version,opts,ok,why",
    [
        ("CONV_2D", 1, QUANT_OFF, True, ""),
        ("CONV_2D", 2, QUANT_OFF, False, "Max version supported: 1. Requested version 2."),
        ("CONV_2D", 6, QUANT_ON, True, ""),
        ("CONV_2D", 7, QUANT_ON, False, "Max version supported: 6. Requested version 7."),
    ],
)
def test_version_limits(op, version, opts, ok, why):
    assert check(conv_op(version), opts) == (ok, why)


def test_depthwise_versions_1_and_2_in_float_models():
    w = np.ones((1, 3, 3, 3), F)
    for version, ok in ((2, True), (3, False)):
        op = one_op(
            "DEPTHWISE_CONV_2D",
            [X4, w, np.zeros(3, F)],
            (1, 4, 5, 3),
            version=version,
            padding="SAME",
            stride_h=1,
            stride_w=1,
            depth_multiplier=1,
        )
        assert check(op, QUANT_OFF)[0] is ok


def test_prelu_has_version_1_only():
    op = one_op("PRELU", [X4, np.ones(3, F)], (1, 4, 5, 3), version=2)
    assert check(op) == (False, "Max version supported: 1. Requested version 2.")


def test_quantize_to_int16_without_quant_gives_a_reason():
    op = one_op("QUANTIZE", [X4], (1, 4, 5, 3), np.int16, Quant(0.001, 0), version=3)
    ok, why = check(op, QUANT_OFF)
    assert not ok and why


# -- tensor types and shapes -------------------------------------------------------------------


def test_rank_above_4_is_type_shape():
    x5 = ((1, 2, 3, 4, 5), F)
    assert check(one_op("RELU", [x5], (1, 2, 3, 4, 5))) == (False, TYPE_SHAPE)
    assert TYPE_SHAPE == "OP is supported, but tensor type/shape isn't compatible."


def test_int32_runtime_tensor_is_type_shape():
    xi = ((2, 3), np.int32)
    assert check(one_op("ADD", [xi, xi], (2, 3), np.int32)) == (False, TYPE_SHAPE)


def test_float16_runtime_tensors_are_accepted():
    xh = ((2, 3), np.float16)
    assert check(one_op("ADD", [xh, xh], (2, 3), np.float16)) == (True, "")


def test_bool_only_for_logical_and():
    xb = ((2, 3), np.bool_)
    assert check(one_op("LOGICAL_AND", [xb, xb], (2, 3), np.bool_)) == (True, "")
    assert check(one_op("MAXIMUM", [xb, xb], (2, 3), np.bool_)) == (False, TYPE_SHAPE)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantized_ops_only_with_enable_quant(dtype):
    xq = ((1, 4, 5, 3), dtype, Q)
    op = one_op("ADD", [xq, xq], (1, 4, 5, 3), dtype, Q, version=2)
    assert check(op, QUANT_ON) == (True, "")
    assert check(op, QUANT_OFF) == (False, TYPE_SHAPE)


def test_quantized_versions_need_enable_quant():
    """ADD v2 (int8) is allowed with quantization on; a float ADD v2 stays allowed too."""
    op = one_op("AVERAGE_POOL_2D", [X4], (1, 4, 5, 3), version=2, padding="SAME",
                filter_height=1, filter_width=1, stride_h=1, stride_w=1)  # fmt: skip
    assert check(op, QUANT_ON) == (True, "")
    assert check(op, QUANT_OFF) == (False, "Max version supported: 1. Requested version 2.")


def test_per_channel_quantized_runtime_tensor_is_not_delegated():
    pc = Quant(np.array([0.1, 0.2, 0.3], np.float32), np.zeros(3, np.int64), axis=3)
    xq = ((1, 4, 5, 3), np.int8, pc)
    op = one_op("RELU", [xq], (1, 4, 5, 3), np.int8, Q, version=2)
    assert check(op) == (False, TYPE_SHAPE)


def test_quantized_tensor_without_parameters_is_type_shape():
    xq = ((1, 4, 5, 3), np.int8)
    assert check(one_op("RELU", [xq], (1, 4, 5, 3), np.int8, version=2)) == (False, TYPE_SHAPE)


# -- fused activations -------------------------------------------------------------------------


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", 6])
def test_fusable_activations(act):
    assert check(conv_op(act=act)) == (True, "")


def test_sign_bit_activation_is_refused_with_its_name():
    ok, why = check(conv_op(act="SIGN_BIT"))
    assert not ok
    assert "SIGN_BIT" in why


# -- per-op constraints ------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor"])
def test_conv_needs_positive_strides_and_dilations(key):
    ok, why = check(conv_op(**{key: 0}))
    assert not ok and why == f"Incorrect {key}: 0."


def test_conv_runtime_weights_are_refused():
    op = one_op(
        "CONV_2D",
        [X4, ((2, 3, 3, 3), F), np.zeros(2, F)],
        (1, 4, 5, 2),
        padding="SAME",
        stride_h=1,
        stride_w=1,
    )
    ok, why = check(op)
    assert not ok and "constant" in why


def test_conv_with_no_runtime_input_is_refused():
    op = one_op(
        "CONV_2D",
        [np.ones((1, 4, 5, 3), F), np.ones((2, 3, 3, 3), F), np.zeros(2, F)],
        (1, 4, 5, 2),
        padding="SAME",
        stride_h=1,
        stride_w=1,
    )
    assert check(op) == (False, "Expected 1 or 2 runtime inputs, got 0.")


def _depthwise(out_c, bias_size, mult=1):
    return one_op(
        "DEPTHWISE_CONV_2D",
        [X4, np.ones((1, 3, 3, out_c), F), np.zeros(bias_size, F)],
        (1, 4, 5, out_c),
        padding="SAME",
        stride_h=1,
        stride_w=1,
        depth_multiplier=mult,
    )


def test_depthwise_channels_must_match_the_multiplier():
    assert check(_depthwise(6, 6, mult=2)) == (True, "")
    ok, why = check(_depthwise(6, 6, mult=1))
    assert not ok and "depth multiplier" in why


def test_depthwise_bias_size_must_equal_output_channels():
    ok, why = check(_depthwise(3, 4))
    assert not ok and "Bias size" in why


def _fc(x, w, out_shape, **options):
    return one_op("FULLY_CONNECTED", [x, w], out_shape, **options)


def test_fully_connected_rules():
    w = np.ones((4, 6), F)
    assert check(_fc(((2, 6), F), w, (2, 4))) == (True, "")
    ok, why = check(_fc(((2, 6), F), w, (2, 4), weights_format=1))  # SHUFFLED4x16INT8
    assert (ok, why) == (False, "Unsupported FullyConnected weights format.")
    ok, why = check(_fc(np.ones((2, 6), F), w, (2, 4)))
    assert (ok, why) == (False, "FullyConnected doesn't support constant input.")
    ok, why = check(_fc(((2, 6), F), ((4, 6), F), (2, 4)))
    assert not ok and "constant" in why


def test_fully_connected_keep_num_dims_needs_equal_rank():
    w = np.ones((4, 6), F)
    assert check(_fc(((2, 3, 6), F), w, (2, 3, 4), keep_num_dims=True)) == (True, "")
    ok, why = check(_fc(((2, 3, 6), F), w, (6, 4), keep_num_dims=True))
    assert not ok and "keep_num_dims" in why


@pytest.mark.parametrize(
    "a,b",
    [
        ((1, 4, 5, 3), (1, 4, 5, 3)),
        ((1, 4, 5, 3), (4, 5, 3)),  # 4D with 3D at batch 1
        ((4, 5, 3), (1, 4, 5, 3)),
        ((2, 4, 5, 3), (1, 1)),  # [1, 1] to 4D
        ((2, 4, 5, 3), (2, 3)),  # [b, c] to [b, x, y, c]
        ((2, 4, 5, 3), (1, 1, 1, 3)),  # same rank, ones broadcast
    ],
)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM"])
def test_allowed_broadcasts(op, a, b):
    out = tuple(
        max(x, y) for x, y in zip((1,) * (4 - len(a)) + a, (1,) * (4 - len(b)) + b, strict=True)
    )
    assert check(one_op(op, [(a, F), (b, F)], out)) == (True, "")


@pytest.mark.parametrize(
    "a,b",
    [
        ((2, 4, 5, 3), (4, 5, 3)),  # 4D with 3D needs batch 1
        ((1, 4, 5, 3), (5, 3)),  # 2D that is not [b, c]
        ((1, 4, 5, 3), (4, 1)),
        ((2, 3), (3, 2)),
    ],
)
def test_refused_broadcasts_name_both_shapes(a, b):
    ok, why = check(one_op("ADD", [(a, F), (b, F)], a))
    assert not ok
    assert why == f"Doesn't support broadcasting - input0: {list(a)}, input1: {list(b)}"


def test_broadcast_against_a_constant_is_allowed():
    op = one_op("MUL", [((2, 4, 5, 3), F), np.ones((5, 1), F)], (2, 4, 5, 3))
    assert check(op) == (True, "")


def test_constant_that_does_not_broadcast_is_refused():
    op = one_op("MUL", [((2, 4, 5, 3), F), np.ones((4, 1), F)], (2, 4, 5, 3))
    ok, why = check(op)
    assert not ok and "do not broadcast" in why


def test_add_with_three_inputs_is_refused():
    x = ((2, 3), F)
    assert check(one_op("ADD", [x, x, x], (2, 3))) == (False, "Expected 2 inputs, got 3.")


def test_softmax_beta_must_be_one():
    assert check(one_op("SOFTMAX", [((2, 5), F)], (2, 5), beta=1.0)) == (True, "")
    ok, why = check(one_op("SOFTMAX", [((2, 5), F)], (2, 5), beta=2.0))
    assert (ok, why) == (False, "Softmax.beta != 1 is not supported.")


@pytest.mark.parametrize("op", ["RESHAPE", "PAD", "TRANSPOSE", "SLICE"])
def test_runtime_shape_like_inputs_are_refused(op):
    """A runtime int32 shape/paddings/perm input fails the tensor type check first."""
    ok, why = check(one_op(op, [((2, 3), F), ((2,), np.int32)], (3, 2)))
    assert (ok, why) == (False, TYPE_SHAPE)


def test_strided_slice_masks():
    ins = [((1, 4, 5, 3), F), np.zeros(4, np.int32), np.int32([1, 2, 2, 3]), np.ones(4, np.int32)]
    assert check(one_op("STRIDED_SLICE", ins, (1, 2, 2, 3))) == (True, "")
    ok, why = check(one_op("STRIDED_SLICE", ins, (1, 2, 2, 3), ellipsis_mask=1))
    assert not ok and "Ellipsis" in why


def test_mean_needs_adjacent_axes():
    x = ((2, 4, 5, 3), F)
    assert check(one_op("MEAN", [x, np.int32([1, 2])], (2, 3))) == (True, "")
    assert check(one_op("MEAN", [x, np.int32([-1])], (2, 4, 5))) == (True, "")
    ok, why = check(one_op("MEAN", [x, np.int32([1, 3])], (2, 5)))
    assert not ok and "non-adjacent" in why


def test_transpose_conv_needs_constant_shape_and_weights():
    x = ((1, 4, 4, 3), F)
    w = np.ones((2, 3, 3, 3), F)
    opts = dict(padding="SAME", stride_h=2, stride_w=2)
    ok_op = one_op("TRANSPOSE_CONV", [np.int32([1, 8, 8, 2]), w, x], (1, 8, 8, 2), **opts)
    assert check(ok_op) == (True, "")
    bad = one_op(
        "TRANSPOSE_CONV", [np.int32([1, 8, 8, 2]), ((2, 3, 3, 3), F), x], (1, 8, 8, 2), **opts
    )
    assert check(bad) == (False, "Output shape and weights must be constant.")


# -- declared output shapes: taken only where they are the computed ones ---------------------

X_POOL = ((1, 4, 4, 1), F)


def _pool(out_shape, **options):
    opts = dict(padding="SAME", stride_h=1, stride_w=1, filter_height=2, filter_width=2)
    opts.update(options)
    return one_op("MAX_POOL_2D", [X_POOL], out_shape, **opts)


def _transpose_conv(out_shape):
    shape, w = np.array([1, 4, 4, 1], np.int32), np.ones((1, 3, 3, 1), F)
    return one_op(
        "TRANSPOSE_CONV",
        [shape, w, ((1, 2, 2, 1), F)],
        out_shape,
        padding="SAME",
        stride_h=2,
        stride_w=2,
    )


@pytest.mark.parametrize(
    "op_sg,declared,computed",
    [
        (lambda: one_op("PRELU", [X4, np.ones((1, 1, 3), F)], (1, 4, 99, 3)), 99, 5),
        (lambda: one_op("PRELU", [X4, np.ones((1, 1, 3), F)], (1, 1, 1, 3)), 1, 4),
        (lambda: _transpose_conv((32768, 4, 4, 1)), 32768, 1),
        (lambda: _transpose_conv((1, 2, 2, 1)), 2, 4),
        (lambda: _pool((1, 4, 4, 1), stride_h=1 << 30, stride_w=1 << 30), 4, 1),
        (lambda: conv_op(stride_h=2), 4, 2),
        (lambda: one_op("RELU", [X4], (1, 4, 5, 4)), 4, 3),
    ],
    ids=[
        "prelu_larger",
        "prelu_smaller",
        "transpose_conv_batch",
        "transpose_conv_smaller",
        "pool_stride",
        "conv_stride",
        "relu",
    ],
)
def test_declared_output_shape_must_be_the_computed(op_sg, declared, computed):
    ok, why = check(op_sg())
    assert not ok
    assert why.startswith("Declared output shape [") and "is not the computed [" in why
    assert str(declared) in why and str(computed) in why


def test_empty_computed_output_is_refused():
    op = _pool((1, 0, 0, 1), padding="VALID", filter_height=1 << 30, filter_width=1 << 30)
    assert check(op) == (False, "Output shape [1, 0, 0, 1] is empty.")


def test_matching_declared_shapes_are_taken():
    assert check(_pool((1, 4, 4, 1))) == (True, "")
    assert check(_transpose_conv((1, 4, 4, 1))) == (True, "")
