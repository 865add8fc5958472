"""The GPU op records: one per op, joined to their kernels by codes from one table."""

from __future__ import annotations

import dataclasses
import re
from importlib import resources

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu.opencl import codes, program, records
from delegate_runtime.gpu.opencl.lowering import Lowerer
from delegate_runtime.gpu.opencl.records import REGISTRY, GpuOp, OpRule, register
from delegate_runtime.gpu.opencl.records.record import source_file
from delegate_runtime.gpu.support import SupportOptions, supports


def one_relu():
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 8), np.float32)
    y = g.tensor("y", (1, 8), np.float32)
    g.op("RELU", [x], [y])
    g.output(y)
    sg = read_model(b.build()).main
    return sg.operators[0], sg


def switch_cases(source: str, kernel: str) -> set[str]:
    """The case labels of the switch in `kernel`'s body."""
    body = source[re.search(rf"\b(void|float) {kernel}\(", source).start() :]
    body = body[: body.index("\n}\n")]
    return set(re.findall(r"case (\w+):", body))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_records_kernel_files_exist(name):
    pkg = resources.files("delegate_runtime.gpu.opencl")
    for source in REGISTRY[name].kernels:
        assert (pkg / source_file(source)).is_file(), f"{name}: {source}"


@pytest.mark.parametrize(
    "kernel,prefix",
    [
        ("unary", "UNARY"),
        ("binary4d", "BINARY"),
        ("act_n", "ACT"),
        ("step_n", "STEP"),
        ("step_operand", "FROM"),
    ],
)
def test_kernel_switch_has_a_case_for_every_code_and_no_other(kernel, prefix):
    cases = switch_cases(program.program_source(), kernel)
    assert cases == {f"{prefix}_{name}" for name in codes.TABLE[prefix]}


def test_every_code_is_defined_once_in_the_program():
    prefixes = "|".join(codes.TABLE)
    defines = re.findall(rf"#define ((?:{prefixes})_\w+) ", program.program_source())
    assert len(defines) == len(set(defines)) == sum(len(c) for c in codes.TABLE.values())


def test_the_program_holds_each_kernel_file_once():
    source = program.program_source()
    assert source.count("__kernel void binary4d(") == 1
    assert source.count("void gemm64v(") == 1


@pytest.mark.parametrize("method,code", [("unary", 99), ("binary", 42)])
def test_lowering_refuses_an_unknown_code(method, code):
    op, sg = one_relu()
    with pytest.raises(ValueError):
        getattr(Lowerer(sg, 1), method)(op, code)


def test_an_op_registered_twice_is_an_error():
    with pytest.raises(ValueError, match="registered twice"):
        register(REGISTRY["RELU"])


def test_a_new_op_is_one_record(monkeypatch):
    """Registering a record is all it takes for support and lowering to know the op."""
    op, sg = one_relu()
    op.op = "CUSTOM:MyRelu"
    assert supports(op, sg, SupportOptions())[0] is False
    record = GpuOp(
        "CUSTOM:MyRelu",
        OpRule((1,)),
        lambda lo, o: lo.unary(o, codes.Unary.RELU),
        ("elementwise.cl",),
    )
    monkeypatch.setitem(records.REGISTRY, record.name, record)
    assert supports(op, sg, SupportOptions()) == (True, "")
    lowerer = Lowerer(sg, 1)
    lowerer.lower(op)
    assert [launch.kernel for launch in lowerer.out.launches] == ["unary"]


def test_record_checks_give_the_ops_own_reasons():
    op, sg = one_relu()
    op.options["fused_activation_function"] = 5  # SIGN_BIT
    assert supports(op, sg) == (False, "Unsupported fused activation: SIGN_BIT.")


def test_a_models_program_holds_the_on_demand_kernels_its_ops_need_only() -> None:
    on_demand = program.on_demand_files()  # as the records declare them
    assert {"reduce.cl", "cumsum.cl", "matmul.cl", "pad_tile.cl", "gather.cl"} == on_demand
    vision = program.kernel_files(["CONV_2D", "ADD"])
    assert not set(vision) & on_demand
    assert "reduce.cl" in program.kernel_files(["SUM"])
    assert set(program.kernel_files()) >= on_demand  # no ops: every file


def test_every_record_listing_an_on_demand_file_declares_it(monkeypatch) -> None:
    tile = records.REGISTRY["TILE"]
    monkeypatch.setitem(records.REGISTRY, "TILE", dataclasses.replace(tile, on_demand=()))
    with pytest.raises(ValueError, match="TILE: lists"):
        program.on_demand_files()
    wrong = dataclasses.replace(tile, on_demand=("cumsum.cl",))
    monkeypatch.setitem(records.REGISTRY, "TILE", wrong)
    with pytest.raises(ValueError, match="TILE: on demand but not listed"):
        program.on_demand_files()
