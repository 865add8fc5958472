"""cl_source.py reads kernels' parameters with a parser of its own (for specialize.py):
checked here against the OpenCL compiler, which reports every built kernel's arguments
(-cl-kernel-arg-info), and on small hand-written texts."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from delegate_runtime.gpu.opencl import cl_source, specialize
from delegate_runtime.gpu.opencl.program import build_options, program_source
from tests.conftest import require, require_module

#: The generic program's comment-free source, its macros and kernels (no OpenCL needed).
TEXT = cl_source.strip_comments(program_source())
MACROS = cl_source.macros(TEXT)
KERNELS = list(cl_source.kernels(TEXT))
SPANS = cl_source.kernels(TEXT)
#: Qualifiers our parser keeps in a parameter's type and a driver leaves out of its name.
QUALIFIERS = re.compile(
    r"\b(?:__)?(?:global|local|constant|private|const|volatile|restrict)\b|__read_only"
    r"|__write_only|\bread_only\b|\bwrite_only\b"
)


@pytest.fixture(scope="module")
def built() -> Any:
    """The generic program built with kernel argument info on the delegate's default
    device (skip locally, fail in CI without OpenCL)."""
    cl = require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")
    from delegate_runtime.gpu.opencl.runtime import describe, list_devices, select_device

    require(bool(list_devices()), "an OpenCL device (a GPU driver or PoCL)")
    device = select_device(None)
    options = build_options("fp32", describe(device)) + " -cl-kernel-arg-info"
    ctx = cl.Context([device])
    return cl.Program(ctx, program_source()).build(options=options, devices=[device])


def driver_args(program: Any, name: str) -> list[tuple[str, str, bool]]:
    """Kernel `name`'s arguments as the driver reports them: (name, type name, private)."""
    import pyopencl as cl

    info, private = cl.kernel_arg_info, cl.kernel_arg_address_qualifier.PRIVATE
    kernel = cl.Kernel(program, name)
    return [
        (
            kernel.get_arg_info(i, info.NAME),
            kernel.get_arg_info(i, info.TYPE_NAME),
            kernel.get_arg_info(i, info.ADDRESS_QUALIFIER) == private,
        )
        for i in range(kernel.num_args)
    ]


def bare_type(type_: str) -> str:
    """A parameter's type without qualifiers or spaces ("__global const float*" -> "float*")."""
    return re.sub(r"\s+", "", QUALIFIERS.sub(" ", type_))


def test_kernel_set_matches_the_built_program(built: Any) -> None:
    """Our parser finds exactly the kernels the compiler built, each once."""
    import pyopencl as cl

    names = built.get_info(cl.program_info.KERNEL_NAMES).split(";")
    assert len(KERNELS) == len(set(KERNELS)), "a kernel found twice"
    assert set(KERNELS) == set(names)


@pytest.mark.parametrize("name", KERNELS)
def test_params_match_the_compiler(built: Any, name: str) -> None:
    """Parameter names, types, and which ones are plain integers, as the compiler says."""
    ours = cl_source.parse_params(SPANS[name].params, MACROS)
    theirs = driver_args(built, name)
    names = [p.name for p in ours]
    assert names == [n for n, _, _ in theirs], f"ours {names}, driver {[n for n, _, _ in theirs]}"
    for param, (arg, type_name, private) in zip(ours, theirs, strict=True):
        assert bare_type(param.type) == type_name.replace(" ", ""), arg
        width = cl_source.INT_TYPES.get(type_name) if private else None
        if param.int_width is not None:  # an integer for us: a private intN for the driver
            assert width == param.int_width, f"{arg}: ours {param.type!r}, driver {type_name!r}"
        elif width is not None:  # the reverse; the driver reports no const on a value
            assert param.type == f"const {type_name}", f"{arg}: ours {param.type!r}"


def test_no_generic_kernel_name_holds_the_separator() -> None:
    """A specialized copy's name is told from every generic kernel's by its separator."""
    assert KERNELS
    assert [n for n in KERNELS if specialize.SEPARATOR in n] == []


# -- the parser's pieces, no OpenCL ------------------------------------------------------------


@pytest.mark.parametrize(
    "width,value,literal",
    [
        (1, 7, "7"),
        (1, np.int32(-3), "-3"),
        (1, np.array([5], np.int32), "5"),
        (4, np.array([1, -2, 3, 4], np.int32), "(int4)(1, -2, 3, 4)"),
        (2, [np.int64(0), np.int64(9)], "(int2)(0, 9)"),
    ],
)
def test_c_literal(width: int, value: Any, literal: str) -> None:
    """Integers of the right width become OpenCL int literals."""
    assert specialize.c_literal(width, value) == literal


@pytest.mark.parametrize(
    "width,value",
    [
        (4, np.array([1, 2], np.int32)),  # too few
        (2, np.array([1, 2, 3, 4], np.int32)),  # too many
        (1, np.array([1, 2], np.int32)),
        (4, np.array([[1, 2], [3, 4]], np.int32)),  # not one vector
        (4, np.array([1, 2, 3, 4], np.float32)),
        (1, 1.5),
        (1, np.float32(2.0)),
        (1, None),
    ],
)
def test_c_literal_refuses(width: int, value: Any) -> None:
    """A value of another width, or not integers, is no literal."""
    assert specialize.c_literal(width, value) is None


FLOAT_VALUES = {
    "ordinary": np.array([1.5, -0.1, 3.0e-39, 6.5504e4], np.float32),  # a subnormal too
    "signed zeros": np.array([0.0, -0.0], np.float32),
    "infinities and NaN": np.array([np.inf, -np.inf, np.nan, np.float32(np.nan) * -1], np.float32),
    "one": np.array([0.1], np.float32),
}


@pytest.mark.parametrize("case", sorted(FLOAT_VALUES))
def test_float_literal_is_exact_in_the_compiler(case: str) -> None:
    """A float argument compiled in holds its bits exactly: the OpenCL compiler's value of
    the literal, written out by a kernel, equals the argument bit for bit (NaN payloads,
    signed zeros, subnormals and infinities included)."""
    cl = require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")
    from delegate_runtime.gpu.opencl.runtime import list_devices, select_device

    require(bool(list_devices()), "an OpenCL device (a GPU driver or PoCL)")
    value = FLOAT_VALUES[case]
    width = value.size
    literal = specialize.float_literal(width, value if width > 1 else value[0])
    assert literal is not None
    vtype = "float" if width == 1 else f"float{width}"
    store = "out[0] = v;" if width == 1 else f"vstore{width}(v, 0, out);"
    source = f"__kernel void k(__global float* out) {{ {vtype} v = {literal}; {store} }}"
    ctx = cl.Context([select_device(None)])
    queue = cl.CommandQueue(ctx)
    program = cl.Program(ctx, source).build()
    out = np.zeros(width, np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, out.nbytes)
    program.k(queue, (1,), None, buf)
    cl.enqueue_copy(queue, out, buf)
    np.testing.assert_array_equal(out.view(np.uint32), value.view(np.uint32))


@pytest.mark.parametrize(
    "width,value",
    [
        (4, np.array([1, 2, 3], np.float32)),  # too few
        (1, np.array([1, 2], np.float32)),
        (2, np.array([1, 2], np.float64)),  # not float32
        (1, np.int32(1)),
        (1, 1.5),  # a Python float: no kernel argument as such
    ],
)
def test_float_literal_refuses(width: int, value: Any) -> None:
    """A value of another width, or not float32, is no float literal."""
    assert specialize.float_literal(width, value) is None


def test_conditionals_and_macros_in_params() -> None:
    """`#if 1` / `#if 0` / `#else` blocks, nested, decided; object-like macros expanded."""
    text = """int a,
#if 1
    int2 b,
#if 0
    float c,
#else
    WIDE d,
#endif
#else
    int e,
#endif
#if 0
#if 1
    int f,
#else
    int g,
#endif
#endif
    __global const STORE* p, int8 h"""
    params = cl_source.parse_params(text, {"WIDE": "VEC", "VEC": "int4", "STORE": "float"})
    assert params == [
        cl_source.Param("int", "a"),
        cl_source.Param("int2", "b"),
        cl_source.Param("int4", "d"),
        cl_source.Param("__global const float*", "p"),
        cl_source.Param("int8", "h"),
    ]
    assert [p.int_width for p in params] == [1, 2, 4, None, 8]


@pytest.mark.parametrize("directive", ["#if FOO", "#ifdef FOO", "#if defined(FOO)"])
def test_undecidable_conditional_raises(directive: str) -> None:
    """A condition that is no constant cannot be decided: ValueError, not a guess."""
    with pytest.raises(ValueError, match="cannot decide"):
        cl_source.parse_params(f"int a,\n{directive}\n  int b,\n#endif\n  int c", {"FOO": "1"})
