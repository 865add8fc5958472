"""Device discovery, keys and the no-op device specs."""

from __future__ import annotations

import argparse

import pytest

from delegate_runtime.errors import JobError
from worker_agent.devices import DeviceInfo, canonical
from worker_agent.discovery import (
    device_specs,
    discover,
    discover_cpu,
    noop_device,
    vendor_name,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("pthread-AMD EPYC", "pthread_amd_epyc"),
        ("NVIDIA  H200", "nvidia_h200"),
        ("Mali-G78 (r1p0)", "mali_g78_r1p0"),
        ("", "unknown"),
    ],
)
def test_canonical(text: str, want: str) -> None:
    assert canonical(text) == want


@pytest.mark.parametrize(
    ("platform", "vendor", "want"),
    [
        ("Portable Computing Language", "AuthenticAMD", "pocl"),
        ("NVIDIA CUDA", "NVIDIA Corporation", "nvidia"),
        ("AMD Accelerated Parallel Processing", "Advanced Micro Devices, Inc.", "amd"),
        ("Weird", "Some Vendor", "some_vendor"),
    ],
)
def test_vendor_names(platform: str, vendor: str, want: str) -> None:
    assert vendor_name(platform, vendor) == want


def test_cpu_reference_is_on_every_host() -> None:
    d = discover_cpu("h1")
    assert d.key == "cpu:reference:h1" and d.kind == "cpu"


def test_noop_spec_options_and_errors() -> None:
    d = noop_device("noop:Slow-1?delay_s=2&tags=a+b", "h")
    assert d.key == "noop:slow_1" and d.tags == ["a", "b"]
    assert d.facts["noop"] == {"delay_s": "2"}
    assert DeviceInfo.from_json(d.to_json()) == d
    with pytest.raises(JobError, match="unknown option"):
        noop_device("noop:x?colour=red", "h")
    with pytest.raises(JobError, match="needs a name"):
        noop_device("noop:", "h")


def test_specs_select_and_unknown_specs_fail() -> None:
    got = discover(["cpu", "noop:z"], tags=["lab"], host="h")
    assert {d.key for d in got} == {"cpu:reference:h", "noop:z"}
    assert all("lab" in d.tags for d in got)
    with pytest.raises(JobError, match="matches no device"):
        discover(["opencl:*no_such_gpu*"], host="h")
    # phones come and go: the agent looks for them again (issue 16, point 4)
    assert discover(["android:*"], host="h") == []


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", None),
        (" cpu , opencl ", ["cpu", "opencl"]),
        ("noop:a?delay_s=1&tags=x+y", ["noop:a?delay_s=1&tags=x+y"]),
        ("opencl:*nvidia*", ["opencl:*nvidia*"]),
        ("*h200*", ["*h200*"]),
        ("android:127.0.0.1:5555", ["android:127.0.0.1:5555"]),
        ("android:[!e]*", ["android:[!e]*"]),
    ],
)
def test_device_specs_that_can_match(text: str, want: list[str] | None) -> None:
    assert device_specs(text) == want


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("gpu", "unknown device kind 'gpu'"),
        ("noop", "unknown device kind 'noop'"),
        ("driver>>1", "'driver>>1' is not a device spec"),
        ("kind=opencl", "selectors such as driver>=535 are submit's"),
        ("cpu opencl", "'cpu opencl' is not a device spec"),
        ("noop:", "needs a name"),
        ("noop:x?colour=red", "unknown option(s) colour"),
        ("cpu,gpu", "unknown device kind 'gpu'"),
    ],
)
def test_device_specs_that_cannot_match_are_usage_errors(text: str, needle: str) -> None:
    """Refused as parsed, before any device is looked for (argparse: exit 2)."""
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        device_specs(text)
    assert needle in str(refused.value)


def test_phones_are_skipped_without_the_android_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without adbutils serves its other devices (even with an adb server up)."""
    import importlib.util

    from worker_agent import discovery

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "adbutils" else real_find_spec(name, *a),
    )
    assert discovery.discover_android("host") == []
    assert any(d.kind == "cpu" for d in discover(host="host"))
