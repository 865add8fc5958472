"""Measurement conditions (delegate_runtime.tools.conditions)."""

from __future__ import annotations

import os
import stat

from delegate_runtime.tools import conditions


def test_a_cpu_set_is_written_as_linux_writes_it():
    assert conditions.cpu_list(frozenset({0, 1, 2, 3, 8, 10, 11})) == "0-3,8,10-11"
    assert conditions.cpu_list(frozenset({5})) == "5"


def test_the_host_conditions_name_the_usable_cpus():
    now = conditions.host_conditions()
    assert now["allowed_cpus"] == len(os.sched_getaffinity(0))
    assert now["cpu_set"] and now["cpu_count"] >= now["allowed_cpus"]


def _fake_smi(tmp_path, line: str):
    """An nvidia-smi that answers the CSV query as the real one does (noheader, nounits)."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho '{line}'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def test_nvidia_clocks_and_temperature_are_read_from_nvidia_smi(tmp_path, monkeypatch):
    _fake_smi(tmp_path, "1980, 3201, 1980, 34, 121.50, P0, 87")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    facts = {"platform": "NVIDIA CUDA", "driver_version": "580.159.04", "opencl_version": "3.0"}
    got = conditions.device_conditions(facts)
    assert got["sm_clock_mhz"] == 1980.0 and got["temperature_c"] == 34.0
    assert got["pstate"] == "P0" and got["power_w"] == 121.5
    assert got["driver"] == "580.159.04"


def test_a_field_nvidia_smi_cannot_read_is_none(tmp_path, monkeypatch):
    _fake_smi(tmp_path, "1980, 3201, 1980, 34, [N/A], P0, [Not Supported]")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    got = conditions.nvidia_conditions()
    assert got["power_w"] is None and got["utilization_pct"] is None


def test_other_vendors_expose_no_clocks():
    got = conditions.device_conditions({"platform": "Portable Computing Language"})
    assert "sm_clock_mhz" not in got and got["platform"] == "Portable Computing Language"
