"""A phone tool's raw output (adb shell bytes) is kept as the database stores it: NUL and
bytes that are not UTF-8 escaped by farm_core.text_safety, nothing lost to U+FFFD."""

from __future__ import annotations

from pathlib import Path

import pytest

from delegate_runtime.tools.benchmark_parser import parse_benchmark_output
from farm_core.configs import CONFIGS
from worker_agent.android import adb
from worker_agent.android.runner import AdbRunner, ToolOutputError
from worker_agent.devices import DeviceInfo
from worker_agent.runners.base import JobSpec

#: What the simulator's "noise" fault prints: a crashing tool's junk.
RAW = b"count=\x00\xff STARTING?!\n\xc3\xa9t\xe9\nSegmentation fault\n"


def test_garbage_from_a_phone_keeps_its_raw_log_escaped(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(adb, "shell", lambda *_a, **_k: (RAW, False))
    monkeypatch.setattr(adb, "state", lambda *_a: "device")  # the phone stayed online
    runner = AdbRunner(DeviceInfo("android:SER1", "android", facts={"serial": "SER1"}))
    runner._client = object()  # no adb server: the two calls above are the phone
    spec = JobSpec(1, 1, tmp_path / "m.tflite", "0" * 64, CONFIGS["cpu"], {"tool_timeout_s": 5})
    with pytest.raises(ToolOutputError) as err:
        runner._run_and_parse("benchmark_model", "/t/bm", ["/t/bm"], spec, parse_benchmark_output)
    assert err.value.log == "count=\\x00\\xff STARTING?!\nét\\xe9\nSegmentation fault\n"
