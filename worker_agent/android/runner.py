"""The adb runner: a job on a phone with the official TFLite tools.

prepare: push the model as /data/local/tmp/devicefarm/<sha256>.tflite.
benchmark: push benchmark_model for the phone's ABI (once per build), cool down, read
temperatures and clocks, run it with quoted arguments under a deadline, read them again,
and parse its output into the record local runs produce. The timed runs are unprofiled;
a second run with `--enable_op_profiling` gives the op profile, never the latency.
diff: the same with inference_diff's run_eval, when the lab host has one.
Afterwards the model is removed. A phone lost on the way, adb's errors and a tool past its
deadline are DeviceErrors (the job moves to another phone); output that does not parse
from a phone still online fails the job with the raw output kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from delegate_runtime.errors import DeviceError, JobError, ModelError
from farm_core.configs import RunConfig, supports
from farm_core.device_support import FACTS_KEY
from farm_core.text_safety import storable_text

from ..devices import DeviceInfo
from ..runners.base import CanaryReading, JobSpec, Runner, RunOutcome
from . import adb, artifacts, conditions, invocations
from .diff_output import parse_diff_output
from .profile_output import op_profile_rows
from .sync import SyncFailed, SyncSession
from .toolset import Tool, Toolset, toolset_for

#: Seconds between the end of one run and the start of the next on a phone (default).
COOLDOWN_S = float(os.environ.get("DEVICEFARM_ANDROID_COOLDOWN_S", "5"))
#: Wait (up to COOL_MAX_WAIT_S) until the hottest zone is below this, when set (degrees C).
MAX_START_TEMP_C = os.environ.get("DEVICEFARM_ANDROID_MAX_TEMP_C")
COOL_MAX_WAIT_S = 120.0
#: A tool's deadline without a job timeout: both loops at max_secs, plus this slack.
TOOL_SLACK_S = 60.0
#: With a job timeout, the tool gets this share of it (the rest: pushes and clean-up).
TIMEOUT_SHARE = 0.8
#: Seconds for small commands (kill, rm) and for a phone's state to settle after a drop.
SMALL_COMMAND_S = 10.0
STATE_SETTLE_S = 0.5
#: How a phone job's figures were timed (a result's `timing`): the path an app ships,
#: unprofiled; the op profile comes from a benchmark_model run of its own.
TIMING = {"path": "shipped", "profile": "separate pass"}


class ToolOutputError(ModelError):
    """A tool ran on a phone that stayed online but gave no result (crash, garbage,
    truncated output). The job fails (the same model fails the same way elsewhere);
    `log` keeps the raw output."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


class ToolTimeout(DeviceError):
    """A phone tool ran past its deadline and was stopped. A loaded lab host or a slow
    transport does that as well as a hung phone, so it is infrastructure's error: the job
    is retried on another device, and no result counts it against this phone. `log`
    keeps what the tool printed."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class AdbRunner(Runner):
    kind = "android"

    def __init__(self, device: DeviceInfo):
        super().__init__(device)
        self.serial = device.facts.get("serial") or device.key.removeprefix("android:")
        self.server = adb.Server.parse(device.facts.get("adb_server"))
        self._client: Any = None
        self._last_end: float | None = None
        self._zone_types: dict[str, str] = {}  #: thermal zone -> type, read once

    # -- plumbing -------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = adb.client(self.server)
        return self._client

    def setup(self) -> None:
        _ = self.client

    def sync(self) -> SyncSession:
        return SyncSession(self.client, self.serial)

    def abis(self) -> list[str]:
        listed = self.device.facts.get("ro.product.cpu.abilist", "")
        abis = [a for a in listed.split(",") if a] or [
            self.device.facts.get("ro.product.cpu.abi", "")
        ]
        return [a for a in abis if a]

    def toolset(self) -> Toolset:
        return toolset_for(self.abis())

    def _raise_if_lost(self, what: str) -> None:
        """DeviceError when the phone is gone (given a moment to settle); else return."""
        if adb.state(self.client, self.serial) != "device":
            time.sleep(STATE_SETTLE_S)
        adb.ensure_online(self.client, self.serial, what)

    def _send(self, session: SyncSession, remote: str, src: bytes | BinaryIO, mode: int) -> None:
        try:
            session.send(remote, src, mode)
        except SyncFailed as exc:
            raise DeviceError(f"{self.device.key}: push to {remote} failed: {exc}") from exc

    def _push_tool(self, session: SyncSession, tool: Tool) -> str:
        """The tool's path on the phone, pushed unless this build is already there."""
        remote = invocations.tool_path(tool.name, tool.sha256)
        have = session.stat(remote)
        if not (have.exists and have.size == tool.size and have.mode & 0o111):
            with tool.path.open("rb") as f:
                self._send(session, remote, f, 0o755)
        return remote

    def _push_inputs(self, session: SyncSession, settings: dict[str, Any]) -> dict[str, Any]:
        """Push the job's own input value files (settings["inputs"]: layer, shape, path on
        this host) by content hash; the settings with each file's sha256 filled in."""
        items = settings.get(invocations.INPUTS) or []
        if not items:
            return settings
        resolved = []
        for item in items:
            try:
                data = Path(item["path"]).read_bytes()
            except (KeyError, TypeError, OSError) as exc:
                raise JobError(f"input value file for {item.get('layer')!r}: {exc}") from exc
            sha = hashlib.sha256(data).hexdigest()
            remote = invocations.input_path(sha)
            if not session.stat(remote).exists:
                self._send(session, remote, data, 0o644)
            resolved.append({**item, "sha256": sha})
        return {**settings, invocations.INPUTS: resolved}

    def _run_and_parse(
        self, name: str, tool: str, argv: list[str], spec: JobSpec, parse: Any
    ) -> Any:
        """Run a pushed tool and parse its output; a phone that vanished is a DeviceError,
        output with no result a ToolOutputError that keeps the raw text."""
        from delegate_runtime.tools.benchmark_parser import BenchmarkParseError

        try:
            text = self._run_tool(tool, argv, self.tool_timeout_s(spec.settings))
        finally:
            self._last_end = time.monotonic()
        try:
            return parse(text)
        except BenchmarkParseError as exc:
            self._raise_if_lost(f"while {name} ran")
            raise ToolOutputError(
                f"{name} on {self.device.key} gave no result: {exc}", text
            ) from exc

    def _run_tool(self, remote_tool: str, argv: list[str], timeout_s: float) -> str:
        """Run a tool's command line; its output, or ToolTimeout / DeviceError."""
        name = remote_tool.rsplit("/", 1)[-1]
        out, late = adb.shell(self.client, self.serial, invocations.line(argv), timeout_s)
        text = storable_text(out)  # as stored: NUL and bytes not UTF-8 escaped (\xNN)
        if late:
            with contextlib.suppress(DeviceError):
                adb.shell(self.client, self.serial, invocations.kill(remote_tool), SMALL_COMMAND_S)
            adb.ensure_online(self.client, self.serial, f"while {name} ran")
            raise ToolTimeout(
                f"{name} ran past its {timeout_s:g} s deadline on {self.device.key} and was "
                "stopped",
                text,
            )
        return text

    def tool_timeout_s(self, settings: dict[str, Any]) -> float:
        """The deadline of one tool run (below the job's soft time limit, when it has one)."""
        if settings.get("tool_timeout_s"):
            return float(settings["tool_timeout_s"])
        natural = 2 * float(settings.get("max_secs", 150.0)) + TOOL_SLACK_S
        soft = settings.get("timeout_s")
        return min(natural, float(soft) * TIMEOUT_SHARE) if soft else natural

    def _conditions(self, settings: dict[str, Any]) -> dict[str, Any]:
        cooldown = float(settings.get("cooldown_s", COOLDOWN_S))
        max_temp = settings.get("max_start_temp_c", MAX_START_TEMP_C)
        since = None if self._last_end is None else time.monotonic() - self._last_end
        with self.sync() as s:
            reading = conditions.cool_down(
                s,
                since,
                cooldown,
                float(max_temp) if max_temp else None,
                COOL_MAX_WAIT_S,
                self._zone_types,
            )
        reading["cooldown_s"] = cooldown
        return reading

    def supports(self, config: RunConfig) -> tuple[bool, str]:
        """The kind's rule, then this phone's recorded accelerators: a configuration the
        phone cannot run is refused with the official tool's reason before anything is
        pushed (farm_core.device_support)."""
        return supports(self.kind, config, self.device.facts)

    def _device_paths(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The settings with the paths discovery found that a delegate's flags name."""
        hexagon = (self.device.facts.get(FACTS_KEY) or {}).get("hexagon") or {}
        if not hexagon.get("skel_dir"):
            return settings
        return {**settings, invocations.DEVICE_PATHS: {"hexagon_lib_path": hexagon["skel_dir"]}}

    # -- hooks ----------------------------------------------------------------------------

    def prepare(self, spec: JobSpec) -> str:
        remote = invocations.model_path(spec.model_sha256)
        with self.sync() as s, spec.model_path.open("rb") as f:
            self._send(s, remote, f, 0o644)
        return remote

    def benchmark(self, spec: JobSpec, path: str) -> dict[str, Any]:
        from delegate_runtime.tools.benchmark_parser import (
            parse_benchmark_output,
        )

        tools = self.toolset()
        with self.sync() as s:
            tool = self._push_tool(s, tools.benchmark_model)
            settings = self._device_paths(self._push_inputs(s, spec.settings))
        before = self._conditions(spec.settings)
        argv = invocations.benchmark_argv(tool, path, spec.config, settings)
        result = self._run_and_parse("benchmark_model", tool, argv, spec, parse_benchmark_output)
        try:
            with self.sync() as s:
                after = conditions.read(s, self._zone_types)
        except DeviceError as exc:  # the figures are complete; only the reading is lost
            after = {"at": time.time(), "error": str(exc)}
        profile_argv = invocations.profile_argv(tool, path, spec.config, settings)
        profiled = self._run_and_parse(
            "benchmark_model (op profile)", tool, profile_argv, spec, parse_benchmark_output
        )
        record = result.to_dict()
        record |= {
            "timing": dict(TIMING),
            "op_profile": profiled.op_profile,
            "op_profile_nodes": op_profile_rows(profiled.op_profile),
            "profile_log": profiled.log,
            "peak_memory_mb": result.memory.peak_mb,
            "user_inputs": [i["layer"] for i in settings.get(invocations.INPUTS) or []],
            "model_path": path,
            "model_sha256": spec.model_sha256,
            "model_size_bytes": spec.model_path.stat().st_size,
            "device": self.facts_summary(),
            "tool": {
                "name": "benchmark_model",
                "abi": tools.abi,
                "sha256": tools.benchmark_model.sha256,
                "argv": argv,
                "profile_argv": profile_argv,
            },  # fmt: skip
            "conditions": {"before": before, "after": after},
        }
        return record

    def diff(self, spec: JobSpec, path: str) -> dict[str, Any]:

        tools = self.toolset()
        if tools.run_eval is None:
            return {"skipped": f"no run_eval for {tools.abi} on this host", "outputs": []}
        with self.sync() as s:
            tool = self._push_tool(s, tools.run_eval)
        runs = int(spec.settings.get("diff_runs", 50))
        argv = invocations.run_eval_argv(
            tool, path, spec.config, runs, self._device_paths(spec.settings)
        )
        record = self._run_and_parse("run_eval", tool, argv, spec, parse_diff_output)
        if spec.settings.get(invocations.INPUTS):
            record["notes"] = [*record.get("notes", []),
                               "run_eval takes no input files (run_eval.cc): random inputs"]  # fmt: skip
        record |= {"model_path": path, "device": self.facts_summary(),
                   "tool": {"name": "run_eval", "abi": tools.abi, "sha256": tools.run_eval.sha256,
                            "argv": argv}}  # fmt: skip
        return record

    def run(self, spec: JobSpec) -> RunOutcome:
        """The base template, with adb's own errors as DeviceError, the run's debug
        artifacts captured around it (artifacts.captured) and clean-up after."""
        try:
            with artifacts.captured(self, spec):
                return super().run(spec)
        except adb.adb_errors() as exc:
            raise DeviceError(f"{self.device.key}: adb failed: {exc}") from exc
        finally:
            self.cleanup(spec)

    def cleanup(self, spec: JobSpec) -> None:
        """Remove the job's model from the phone (nothing to do when the phone is gone)."""
        with contextlib.suppress(DeviceError, JobError, *adb.adb_errors()):
            line = invocations.remove(invocations.model_path(spec.model_sha256))
            adb.shell(self.client, self.serial, line, SMALL_COMMAND_S)

    def canary(self, model_bytes: bytes, inputs: list[np.ndarray]) -> CanaryReading:
        """A phone has no canary outputs to compare (the tools print figures only): check
        that it is attached and that this host has its tools, then skip."""
        adb.ensure_online(self.client, self.serial, "before its canary")
        self.toolset()
        raise NotImplementedError("phones are checked for presence and tools only")

    def facts_summary(self) -> dict[str, Any]:
        d = self.device
        return {"key": d.key, "model": d.model, "renderer": d.renderer,
                "driver_version": d.driver_version, "android_sdk": d.android_sdk,
                "abi": d.facts.get("ro.product.cpu.abi", "")}  # fmt: skip

    def versions(self) -> dict[str, Any]:
        out = super().versions()
        out |= {"android_sdk": self.device.android_sdk, "gles_version": self.device.driver_version}
        with contextlib.suppress(DeviceError):
            tools = self.toolset()
            out["benchmark_model_sha256"] = tools.benchmark_model.sha256
            out["abi"] = tools.abi
        return out
