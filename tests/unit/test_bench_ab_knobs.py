"""bench/ab_knobs.py's --variant parsing: settings apart at the commas that start the next
NAME=, so a value may hold commas of its own (a dict of GEMM variants); a switch of the
switchboard by its field, record name or old module path (a fusion's rule too), any
other name a module's constant."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from delegate_runtime.gpu.opencl.records import gemm_kernel

BENCH = Path(__file__).resolve().parents[2] / "bench" / "ab_knobs.py"


def _ab_knobs():
    spec = importlib.util.spec_from_file_location("ab_knobs", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_a_value_holding_commas_is_one_setting():
    text = (
        'tk32=opencl.records.gemm_kernel.GEMM_VARIANTS={"gemm64": (64, 4, 32), "gemm32": (32, 2, 32)},'
        "opencl.fusions.depthwise_into_gemm.DEPTHWISE_MAX_GEMM_MACS=7"
    )
    name, variant = _ab_knobs().parse_variant(text)
    assert name == "tk32" and variant.switches == {"depthwise_max_gemm_macs": 7}
    assert variant.constants == [
        (gemm_kernel, "GEMM_VARIANTS", {"gemm64": (64, 4, 32), "gemm32": (32, 2, 32)}),
    ]


def test_switches_are_named_by_field_or_by_record_name():
    text = "v=persistent.MAX_RUN_BYTES=None,opencl.lowering.GEMM_GROUPS_PER_CU=8,flush_every=3"
    name, variant = _ab_knobs().parse_variant(text)
    assert variant.constants == []
    assert variant.switches == {
        "persistent_max_run_bytes": None,
        "gemm_groups_per_cu": 8,
        "flush_every": 3,
    }


def test_an_unknown_constant_is_refused():
    with pytest.raises(SystemExit, match="has no NO_SUCH"):
        _ab_knobs().parse_variant("x=opencl.fusions.depthwise_into_gemm.NO_SUCH=1")
