"""The fast forms of the GPU ops (opencl/op_forms.py): every op has each form an op of its
family has, or its record says why not; and the records' declared launches are what their
lowerings launch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu.opencl import op_forms
from delegate_runtime.gpu.opencl.lowering import Lowerer
from delegate_runtime.gpu.opencl.program import program_source
from delegate_runtime.gpu.opencl.records import REGISTRY
from delegate_runtime.gpu.opencl.specialize import generic_name

pytest.importorskip("pyopencl")  # the GPU delegate's modules

SOURCE = program_source()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_record_says_what_it_launches_and_its_family(name):
    record = REGISTRY[name]
    assert record.launches is not None, f"{name}: no launches declared"
    assert record.family in op_forms.FAMILIES, f"{name}: family {record.family!r}"
    for pattern in record.launches:
        assert op_forms.kernels_of(dataclasses.replace(record, launches=(pattern,)), SOURCE), (
            f"{name}: no kernel {pattern!r} in the program"
        )


def test_every_op_has_its_familys_forms_or_says_why_not():
    unexplained = {
        op: sorted(form for form, why in lacking.items() if not why)
        for op, lacking in op_forms.missing().items()
        if not all(lacking.values())
    }
    assert unexplained == {}


def test_no_record_gives_a_reason_for_a_form_it_does_not_lack():
    lacking = op_forms.missing()
    stale = {
        r.name: sorted(set(r.lacks) - set(lacking.get(r.name, {})))
        for r in REGISTRY.values()
        if set(r.lacks) - set(lacking.get(r.name, {}))
    }
    assert stale == {}


def test_the_forms_the_backend_gives_the_convolutions():
    assert op_forms.forms_of(REGISTRY["DEPTHWISE_CONV_2D"], SOURCE) == {
        "specialized",
        "persistent",
        "epilogue",
        "step",
    }
    assert op_forms.forms_of(REGISTRY["FULLY_CONNECTED"], SOURCE) == {
        "specialized",
        "persistent",
        "epilogue",
    }
    assert op_forms.forms_of(REGISTRY["ADD"], SOURCE) == {"epilogue", "step"}
    assert op_forms.forms_of(REGISTRY["RESHAPE"], SOURCE) == set()  # launches nothing


def test_a_dropped_form_fails(monkeypatch):
    """Depthwise kernels no longer specialized, or FULLY_CONNECTED's epilogue dropped: the
    op is listed as lacking its family's form, with no reason."""
    prefixes = tuple(p for p in op_forms.SPECIALIZED_PREFIXES if p != "depthwise")
    monkeypatch.setattr(op_forms, "SPECIALIZED_PREFIXES", prefixes)
    lacking = op_forms.missing()["DEPTHWISE_CONV_2D"]
    assert lacking == {"specialized": "", "persistent": ""}
    monkeypatch.undo()
    fc = dataclasses.replace(REGISTRY["FULLY_CONNECTED"], epilogue=False)
    records = [fc if r.name == fc.name else r for r in REGISTRY.values()]
    assert op_forms.missing(records)["FULLY_CONNECTED"]["epilogue"] == ""


def test_every_fusion_is_reached_from_the_records_it_involves():
    import importlib
    import pkgutil

    from delegate_runtime.gpu.opencl import fusions
    from delegate_runtime.gpu.opencl.fusions.plan import FUSION_MODULES

    named = {  # every module of the package that is a fusion (has a NAME) is applied
        info.name
        for info in pkgutil.iter_modules(fusions.__path__)
        if hasattr(importlib.import_module(f"{fusions.__name__}.{info.name}"), "NAME")
    }
    assert {m.__name__.rsplit(".", 1)[1] for m in FUSION_MODULES} == named
    for module in FUSION_MODULES:
        assert any(module.involves(r) for r in REGISTRY.values()), module.NAME
    assert op_forms.fusions_of(REGISTRY["CONV_2D"]) == [
        "gate_into_conv",
        "affine_into_conv",
        "pad_into_reader",
        "depthwise_into_gemm",
        "epilogue",
        "squeeze_excite_convs",
        "mean_into_gemm",
        "relu_into_readers",
    ]
    assert op_forms.fusions_of(REGISTRY["EXP"]) == []  # no step code, no epilogue


# -- the declared launches against the lowering ------------------------------------------


def one_op(op: str, inputs: list, out_shape: tuple, out_dtype=np.float32, **options):
    """A model of one `op`: each input a shape (a runtime float input) or an array (a
    constant)."""
    b = ModelBuilder()
    g = b.main
    ids = []
    for i, x in enumerate(inputs):
        if isinstance(x, tuple):
            ids.append(g.input(f"x{i}", x, np.float32))
        else:
            ids.append(g.const(f"c{i}", np.asarray(x)))
    y = g.tensor("y", out_shape, out_dtype)
    g.op(op, ids, [y], **options)
    g.output(y)
    return read_model(b.build()).main


W = np.random.default_rng(0).standard_normal
CASES = {
    "conv 1x1": ("CONV_2D", [(1, 4, 4, 8), W((16, 1, 1, 8)).astype(np.float32)], (1, 4, 4, 16)),
    "conv 3x3": ("CONV_2D", [(1, 6, 6, 3), W((4, 3, 3, 3)).astype(np.float32)], (1, 4, 4, 4)),
    "depthwise": (
        "DEPTHWISE_CONV_2D",
        [(1, 6, 6, 8), W((1, 3, 3, 8)).astype(np.float32)],
        (1, 4, 4, 8),
    ),
    "fully connected": ("FULLY_CONNECTED", [(2, 8), W((4, 8)).astype(np.float32)], (2, 4)),
    "average pool": ("AVERAGE_POOL_2D", [(1, 4, 4, 8)], (1, 2, 2, 8)),
    "mean": ("MEAN", [(1, 4, 4, 8), np.array([1, 2], np.int32)], (1, 8)),
    "softmax": ("SOFTMAX", [(2, 8)], (2, 8)),
    "add": ("ADD", [(2, 8), (2, 8)], (2, 8)),
    "relu": ("RELU", [(2, 8)], (2, 8)),
    "exp": ("EXP", [(2, 8)], (2, 8)),
    "equal": ("EQUAL", [(2, 8), (2, 8)], (2, 8), np.bool_),
    "cumsum": ("CUMSUM", [(2, 8), np.array(1, np.int32)], (2, 8)),
    "sum": ("SUM", [(2, 8), np.array([1], np.int32)], (2,)),
    "transpose": ("TRANSPOSE", [(2, 8), np.array([1, 0], np.int32)], (8, 2)),
}
OPTIONS = {
    "CONV_2D": {"padding": 1, "stride_w": 1, "stride_h": 1},
    "DEPTHWISE_CONV_2D": {"padding": 1, "stride_w": 1, "stride_h": 1, "depth_multiplier": 1},
    "AVERAGE_POOL_2D": {
        "padding": 1,
        "stride_w": 2,
        "stride_h": 2,
        "filter_width": 2,
        "filter_height": 2,
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_lowering_launches_what_its_record_declares(case):
    op_name, inputs, out_shape, *dtype = CASES[case]
    sg = one_op(op_name, inputs, out_shape, *dtype, **OPTIONS.get(op_name, {}))
    lowerer = Lowerer(sg, 8)
    lowerer.lower(sg.operators[0])
    launched = {generic_name(launch.kernel) for launch in lowerer.out.launches}
    declared = op_forms.kernels_of(REGISTRY[op_name], SOURCE)
    assert launched and launched <= set(declared), (launched, declared)
