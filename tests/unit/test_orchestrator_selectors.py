"""Device selectors and run configurations."""

from __future__ import annotations

import pytest

from orchestrator.configs import parse_configs, supports
from orchestrator.selectors import parse_selector

NVIDIA = {
    "key": "opencl:nvidia:h200",
    "kind": "opencl",
    "vendor": "nvidia",
    "model": "NVIDIA H200",
    "driver_version": "535.104.05",
    "tags": ["lab1", "big"],
    "host": "h1",
    "renderer": "",
    "api_version": "OpenCL 3.0",
}
POCL = {
    "key": "opencl:pocl:pthread_amd_epyc",
    "kind": "opencl",
    "vendor": "pocl",
    "model": "pthread-AMD EPYC",
    "driver_version": "3.0-rc2",
    "tags": [],
    "host": "h2",
    "renderer": "",
    "api_version": "OpenCL 3.0",
}


@pytest.mark.parametrize(
    ("text", "nvidia", "pocl"),
    [
        ("all", True, True),
        ("kind=opencl", True, True),
        ("vendor=nvidia", True, False),
        ("vendor=nvidia|pocl", True, True),
        ("vendor!=nvidia", False, True),
        ("driver>=535", True, False),
        ("driver<=3.1", False, True),
        ("tag=lab1", True, False),
        ("opencl:pocl:*", False, True),
        ("key=opencl:nvidia:*,tag=big", True, False),
        ("model=*h200*", True, False),
        ("host=h2,kind=opencl", False, True),
    ],
)
def test_selector_matches(text: str, nvidia: bool, pocl: bool) -> None:
    selector, errors = parse_selector(text)
    assert errors == []
    assert (selector.matches(NVIDIA), selector.matches(POCL)) == (nvidia, pocl)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty device selector"),
        ("colour=red", "unknown selector field 'colour'"),
        ("vendor=", "has no value"),
        ("driver>=abc", "needs a version number"),
        ("kind=opencl,,", "empty term"),
    ],
)
def test_selector_errors(text: str, needle: str) -> None:
    selector, errors = parse_selector(text)
    assert selector is None
    assert any(needle in e for e in errors), errors


def test_selector_collects_every_error() -> None:
    _, errors = parse_selector("colour=red,size=big")
    assert len(errors) == 2


def test_configs_parse_and_collect_errors() -> None:
    configs, errors = parse_configs("cpu,gpu-fp16")
    assert [c.name for c in configs] == ["cpu", "gpu-fp16"] and errors == []
    assert configs[1].use_gpu and configs[1].precision == "fp16"
    _, errors = parse_configs("cpu,cpu,gpu-fp64,")
    assert any("given twice" in e for e in errors)
    assert any("unknown configuration 'gpu-fp64'" in e for e in errors)
    assert parse_configs("")[1] == [parse_configs("")[1][0]]


@pytest.mark.parametrize(
    ("kind", "config", "ok"),
    [
        ("cpu", "cpu", True),
        ("cpu", "gpu-fp32", False),
        ("opencl", "gpu-fp16", True),
        ("opencl", "cpu", False),
        ("android", "cpu", True),
        ("martian", "cpu", False),
    ],
)
def test_which_kinds_run_which_configs(kind: str, config: str, ok: bool) -> None:
    got, why = supports(kind, config)
    assert got == ok and (ok or why)
