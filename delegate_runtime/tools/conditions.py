"""The conditions a figure was measured under: the host's load and usable CPUs, its CPU
clock and temperature, and the GPU's driver, platform, clocks and temperature where the
device exposes them (NVIDIA through `nvidia-smi`; other drivers expose none to a user).

Read just before and just after the timed runs, so a result shows whether the machine
changed under it (a throttling GPU, a host that got busy).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from .. import host_cpus

#: nvidia-smi's query: field -> the record's key.
NVIDIA_FIELDS = {
    "clocks.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "temperature.gpu": "temperature_c",
    "power.draw": "power_w",
    "pstate": "pstate",
    "utilization.gpu": "utilization_pct",
}
NVIDIA_SMI_TIMEOUT_S = 5.0


def cpu_list(cpus: frozenset[int]) -> str:
    """A CPU set as Linux writes it: "0-3,8,10-11"."""
    spans: list[list[int]] = []
    for cpu in sorted(cpus):
        if spans and cpu == spans[-1][1] + 1:
            spans[-1][1] = cpu
        else:
            spans.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def _cpu_mhz() -> float | None:
    """The mean current clock of the host's CPUs (/proc/cpuinfo), None where unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
    except (OSError, ValueError, IndexError):
        return None
    return round(sum(mhz) / len(mhz), 1) if mhz else None


def _host_temperature_c() -> float | None:
    """The hottest thermal zone of the host (°C), None where none is readable."""
    temps = []
    for path in glob.glob("/sys/class/thermal/thermal_zone*/temp"):
        try:
            with open(path) as f:
                temps.append(int(f.read().strip()) / 1000.0)
        except (OSError, ValueError):
            continue
    return max(temps) if temps else None


def host_conditions() -> dict[str, Any]:
    """The host's load, usable CPUs, clock and temperature now."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "host_load": load,
        "allowed_cpus": host_cpus.usable_cpus(),
        "cpu_set": cpu_list(host_cpus.affinity()),
        "cpu_count": os.cpu_count(),
        "cpu_mhz": _cpu_mhz(),
        "host_temperature_c": _host_temperature_c(),
    }


def _number(text: str) -> Any:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return text if text and not text.startswith("[") else None


def nvidia_conditions(pci_bus: str | None = None) -> dict[str, Any]:
    """NVIDIA's clocks, temperature, power and P-state (the first GPU, or `pci_bus`);
    {} where nvidia-smi is absent or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {}
    cmd = [smi, f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv,noheader,nounits"]
    if pci_bus:
        cmd.append(f"--id={pci_bus}")
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    first = out.strip().splitlines()[:1]
    if not first:
        return {}
    values = [_number(v) for v in first[0].split(",")]
    return dict(zip(NVIDIA_FIELDS.values(), values, strict=False))


def device_conditions(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU's driver and platform (from the session's facts), with its clocks and
    temperature where the vendor exposes them."""
    out = {
        "driver": facts.get("driver_version"),
        "platform": facts.get("platform"),
        "platform_version": facts.get("opencl_version"),
        "device": facts.get("name"),
    }
    if "NVIDIA" in str(facts.get("platform", "")) or "NVIDIA" in str(facts.get("vendor", "")):
        out |= nvidia_conditions()
    return {k: v for k, v in out.items() if v is not None}


def snapshot(facts: Mapping[str, Any] | None, gpu: bool) -> dict[str, Any]:
    """Host conditions, and the device's when `gpu`."""
    out = host_conditions()
    if gpu and facts:
        out |= device_conditions(facts)
    return out
