"""A realistic demo lab for tests, benchmarks and demos, made the way the farm makes its data.

A lab of three hosts (desktop OpenCL GPUs, the CPU reference, Android phones), four models
and a series of campaigns over the last weeks, with the situations the dashboard and the
allowlist must show: a GPU slower than the CPU, ops that fall back, fp16 error too large,
a crash, an unstable phone, two phones the list cannot tell apart, a driver update that
fixed a model, a regression in the newest campaign, an unmeasured phone, a campaign still
running.

Nothing is written by hand: hosts' agents register the devices, `submit()` stores each
campaign (dated in the past), every job goes through the real claim and finish transitions
with what a runner would have measured, and `worker_agent.executor.result_values` turns
that into the result row, as on a lab host. Only the measurements are made up.
"""

from __future__ import annotations

import hashlib
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select, update

from farm_core import jobs
from farm_core.configs import DEFAULT_CONFIGS, KIND_CONFIGS
from farm_core.dispatch import SendOrder
from farm_core.schema import (
    FAILED,
    HEALTHY,
    QUARANTINED,
    SUCCEEDED,
    TIMED_OUT,
    Device,
    Job,
    utcnow,
)
from farm_core.selectors import MAX_SELECTOR_CHARS
from orchestrator.submit import submit
from worker_agent import health
from worker_agent.agent import Agent
from worker_agent.devices import DeviceInfo
from worker_agent.executor import result_values
from worker_agent.runners.base import RunOutcome

#: What a demo job's runner reports as its software.
VERSIONS = {"devicefarm": "0.1.0"}
#: How long each demo job runs, s; its lease while it runs, s.
JOB_S = 20.0
LEASE_S = 180.0
#: The phone whose driver update (half-way through the campaigns) fixed fp16.
REDMI = "android:redmi8"


@dataclass(frozen=True)
class DemoModel:
    name: str
    scale: float  #: makes each model's bytes (and sha256) differ
    cpu_us: float  #: on the lab1 CPU reference
    gpu_affinity: float = 1.0  #: how much the GPU helps this model
    ops: int = 31
    outputs: tuple[str, ...] = ("MobilenetV1/Predictions/Reshape_1",)
    unsupported: tuple[tuple[str, str], ...] = ()  #: ops the GPU delegate leaves
    top1: float | None = None  #: task accuracy (classification) on the CPU
    quantized: bool = False


MODELS = (
    DemoModel("mobilenet_v1_1.0_224.tflite", 1.0, 80_000, 1.0, 31, top1=0.709),
    DemoModel(
        "ssd_mobilenet_v2.tflite",
        2.0,
        150_000,
        0.8,
        110,
        ("raw_outputs/box_encodings", "raw_outputs/class_predictions", "scores", "count"),
        (("CUSTOM", "TFLite_Detection_PostProcess: Operation is not supported."),),
    ),
    DemoModel(
        "efficientnet_lite0_int8.tflite",
        3.0,
        60_000,
        0.6,
        64,
        ("logits",),
        top1=0.742,
        quantized=True,
    ),
    DemoModel("deeplab_v3.tflite", 4.0, 300_000, 1.2, 71, ("SemanticPredictions",)),
)


@dataclass(frozen=True)
class DemoDevice:
    key: str
    kind: str
    host: str
    vendor: str = ""
    model: str = ""
    renderer: str = ""
    driver_version: str = ""
    api_version: str = ""
    android_sdk: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    speed: float = 1.0  #: GPU speed-up over the host CPU reference
    cpu_factor: float = 1.0  #: CPU latency relative to lab1's reference
    fp16_gain: float = 1.6
    noise: float = 0.03  #: relative spread of latency between runs
    error_scale: float = 1.0
    crashes: tuple[str, ...] = ()  #: model names that crash on this GPU
    state: str = "online"
    health: str = HEALTHY
    health_reason: str = ""
    tags: tuple[str, ...] = ()

    def row(self) -> dict[str, Any]:
        """The device as the devices table (and a result's device_facts) has it."""
        return {
            "key": self.key,
            "kind": self.kind,
            "vendor": self.vendor,
            "model": self.model,
            "renderer": self.renderer,
            "driver_version": self.driver_version,
            "api_version": self.api_version,
            "android_sdk": self.android_sdk,
            "host": self.host,
            "tags": list(self.tags),
            "facts": dict(self.facts),
        }


def _phone(
    serial: str,
    manufacturer: str,
    model: str,
    device: str,
    sdk: int,
    renderer: str,
    gl: str,
    soc: str,
    **kw: Any,
) -> DemoDevice:
    gles = gl.split()[2] if gl.startswith("OpenGL ES") else "3.2"
    return DemoDevice(
        key=f"android:{serial}",
        kind="android",
        host="lab3",
        vendor=manufacturer.lower(),
        model=model,
        renderer=renderer,
        driver_version=gl,
        api_version=f"OpenGL ES {gles}",
        android_sdk=sdk,
        facts={
            "ro.product.manufacturer": manufacturer,
            "ro.product.model": model,
            "ro.product.device": device,
            "ro.build.version.sdk": str(sdk),
            "ro.board.platform": soc,
            "gles_vendor": "Qualcomm" if "Adreno" in renderer else renderer.split("-")[0],
        },
        cpu_factor=kw.pop("cpu_factor", 1.5),
        **kw,
    )


ADRENO_618_GL = "OpenGL ES 3.2 V@415.0 (GIT@663be55, I724753c5e3) (Date:02/28/20)"
OLD_REDMI_GL = "OpenGL ES 3.2 V@0490.0 (GIT@0a1e7e2, Ib3a4a6a0d1) (Date:06/11/20)"

DEVICES = (
    DemoDevice("cpu:reference:lab1", "cpu", "lab1", "reference", "x86_64", "", "numpy 2.1"),
    DemoDevice(
        "opencl:nvidia:nvidia_geforce_rtx_3080",
        "opencl",
        "lab1",
        "nvidia",
        "NVIDIA GeForce RTX 3080",
        "NVIDIA GeForce RTX 3080",
        "550.54.14",
        "OpenCL 3.0 CUDA",
        speed=18.0,
        tags=("desktop",),
    ),
    DemoDevice(
        "opencl:amd:gfx1030",
        "opencl",
        "lab1",
        "amd",
        "gfx1030",
        "AMD Radeon RX 6800",
        "3614.0 (HSA1.1,LC)",
        "OpenCL 2.1 AMD-APP (3614.0)",
        speed=14.0,
        tags=("desktop",),
    ),
    DemoDevice(
        "cpu:reference:lab2",
        "cpu",
        "lab2",
        "reference",
        "x86_64",
        "",
        "numpy 2.1",
        cpu_factor=1.3,
    ),
    DemoDevice(
        "opencl:intel:intel_r_uhd_graphics_630",
        "opencl",
        "lab2",
        "intel",
        "Intel(R) UHD Graphics 630",
        "Intel(R) UHD Graphics 630",
        "23.52.28202.26",
        "OpenCL 3.0 NEO",
        speed=1.1,
        tags=("desktop", "igpu"),
    ),
    DemoDevice(
        "opencl:pocl:pthread_cpu",
        "opencl",
        "lab2",
        "pocl",
        "pthread-cpu",
        "pthread-cpu",
        "6.0",
        "OpenCL 3.0 PoCL",
        speed=0.5,
        noise=0.05,
    ),
    _phone(
        "pixel7",
        "Google",
        "Pixel 7",
        "panther",
        34,
        "Mali-G710 MC10",
        "OpenGL ES 3.2 v1.r38p1-01eac0.8b3b6a1bc2ed2a4b6cb0c1c5f2e4f1f2",
        "gs201",
        speed=4.0,
        crashes=("deeplab_v3.tflite",),
    ),
    _phone(
        "s21",
        "samsung",
        "SM-G991B",
        "o1s",
        33,
        "Adreno (TM) 660",
        "OpenGL ES 3.2 V@0502.0 (GIT@04b7ba4, I9e8c0a1b2c) (Date:11/24/21)",
        "lahaina",
        speed=6.0,
    ),
    _phone(
        "pixel4a",
        "Google",
        "Pixel 4a",
        "sunfish",
        30,
        "Adreno (TM) 618",
        ADRENO_618_GL,
        "sm6150",
        speed=3.0,
    ),
    _phone(
        "a52_1",
        "samsung",
        "SM-A525F",
        "a52q",
        31,
        "Adreno (TM) 618",
        ADRENO_618_GL,
        "sm7125",
        speed=3.4,
    ),
    _phone(
        "a52_2",
        "samsung",
        "SM-A525F",
        "a52q",
        31,
        "Adreno (TM) 618",
        ADRENO_618_GL,
        "sm7125",
        speed=3.3,
        state="offline",
    ),
    _phone(
        "redmi8",
        "Xiaomi",
        "Redmi Note 8",
        "ginkgo",
        30,
        "Adreno (TM) 610",
        "OpenGL ES 3.2 V@0502.0 (GIT@18d2cf3, I5d2b0a3e44) (Date:10/20/21)",
        "trinket",
        speed=2.2,
    ),
    _phone(
        "moto_e",
        "motorola",
        "moto e(7)",
        "malta",
        29,
        "PowerVR Rogue GE8320",
        "OpenGL ES 3.2 build 1.13@5776728",
        "mt6762",
        speed=1.8,
        noise=0.45,
    ),
    _phone(
        "oneplus7",
        "OnePlus",
        "GM1913",
        "OnePlus7Pro",
        31,
        "Adreno (TM) 640",
        "OpenGL ES 3.2 V@0490.0 (GIT@1d3b8a1, I4f3a1d9c77) (Date:05/19/20)",
        "msmnile",
        speed=5.0,
        error_scale=20.0,
    ),
    _phone(
        "quarantined_tab",
        "samsung",
        "SM-T505",
        "gta7lite",
        30,
        "PowerVR Rogue GE8320",
        "OpenGL ES 3.2 build 1.13@5776728",
        "mt6762",
        speed=1.5,
        health=QUARANTINED,
        health_reason="canary drifted: max error 0.31 above 0.01",
    ),
)
#: Registered, never measured: the list must say unknown.
NEW_PHONE = _phone(
    "pixel8",
    "Google",
    "Pixel 8",
    "shiba",
    34,
    "Mali-G715-Immortalis MC10",
    "OpenGL ES 3.2 v1.r44p0",
    "zuma",
)
#: The Redmi's facts before its driver update: fp16 was wrong there.
REDMI_BEFORE_UPDATE = dict(driver_version=OLD_REDMI_GL, error_scale=15.0)


@dataclass
class SeedSummary:
    """What `seed` wrote."""

    models: dict[str, str]  #: name -> sha256
    devices: list[str]
    campaigns: int
    jobs: int
    results: int


def extra_phones(n: int) -> list[DemoDevice]:
    """`n` more phones (for benchmarks): Adreno and Mali generations, SDK 28-34."""
    gpus = ("Adreno (TM) 610", "Adreno (TM) 640", "Adreno (TM) 730", "Mali-G57 MC2", "Mali-G78")
    out = []
    for i in range(n):
        gpu = gpus[i % len(gpus)]
        out.append(
            _phone(
                f"bench{i:03d}",
                "Vendor" + str(i % 7),
                f"Model {i}",
                f"dev{i}",
                28 + i % 7,
                gpu,
                f"OpenGL ES 3.2 V@{400 + i % 9}.0",
                f"soc{i % 11}",
                speed=1.0 + (i % 9) * 0.6,
                noise=0.05 + (i % 5) * 0.02,
            )
        )
    return out


def extra_models(n: int) -> list[DemoModel]:
    """`n` more models (for benchmarks: a lab's larger catalogue), classifiers of varied
    cost and GPU benefit, each its own bytes."""
    return [
        DemoModel(
            f"catalogue_{i:03d}.tflite",
            10.0 + i,
            30_000 + (i % 13) * 20_000,
            0.5 + (i % 7) * 0.15,
            20 + i % 90,
            ("logits",),
            quantized=i % 3 == 0,
        )
        for i in range(n)
    ]


def _measure(
    rng: random.Random,
    m: DemoModel,
    d: DemoDevice,
    config: str,
    cpu_ref_us: float,
    slow: float,
) -> RunOutcome:
    """What a runner would have measured for `m` on `d` in `config`."""
    jitter = max(rng.lognormvariate(0.0, d.noise), 0.2)
    if config == "cpu":
        avg = m.cpu_us * d.cpu_factor * jitter * slow
        deleg: dict[str, Any] = {}
        err = None
    else:
        gain = d.speed * m.gpu_affinity * (d.fp16_gain if config == "gpu-fp16" else 1.0)
        avg = cpu_ref_us / gain * jitter * slow
        left = len(m.unsupported)
        deleg = {
            "delegate": "TfLiteGpuDelegateV2",
            "nodes_delegated": m.ops - left,
            "nodes_total": m.ops,
            "partitions": 1,
            "fully_delegated": left == 0,
            "unsupported": [{"op": op, "reason": why} for op, why in m.unsupported],
        }
        base = 2e-3 if config == "gpu-fp16" else 2e-6
        err = base * d.error_scale * rng.uniform(0.5, 1.5)
    std = avg * d.noise * rng.uniform(0.5, 1.5)
    cold = rng.random() < 0.3
    init = avg * 12 if config == "cpu" else avg * 40 + 900_000 * (1 if cold else 0.15)
    peak = 40 + m.ops * 1.5 + (60 if config != "cpu" else 0)
    outputs = (
        [
            {
                "index": i,
                "name": name,
                "avg_error": err * (1 + i * 0.2),
                "std_dev": err * 0.3,
                "max_error": err * 8,
            }
            for i, name in enumerate(m.outputs)
        ]
        if err is not None
        else []
    )
    diff: dict[str, Any] = {"num_runs": 50, "outputs": outputs} if outputs else {}
    if diff and m.top1 is not None:
        diff["task_accuracy"] = {"top1": round(m.top1 - err * 2 - rng.uniform(0, 0.002), 4)}
    benchmark = {
        "source": "delegate_runtime" if d.kind != "android" else "benchmark_model",
        "init_us": init,
        "avg_us": avg,
        "std_us": int(std),
        "median_us": avg * 0.99,
        "p95_us": avg * (1 + 2 * d.noise),
        "count": 50,
        "program_from_cache": config != "cpu" and not cold,
        "memory": {
            "init_mb": peak * 0.7,
            "overall_mb": peak * 0.9,
            "peak_mb": peak,
            "device_bytes": int(peak * 0.5e6) if config != "cpu" else None,
        },
        "peak_memory_mb": peak,
        "op_profile_nodes": _op_profile(m, config, avg),
        "options": {
            "precision": "fp16" if config == "gpu-fp16" else "fp32",
            "enable_quant": True,
            "use_gpu": config != "cpu",
        },
    }
    return RunOutcome(benchmark, diff, deleg, dict(VERSIONS))


def _op_profile(m: DemoModel, config: str, avg_us: float) -> list[dict[str, Any]]:
    """A runner's `op_profile_nodes`: on the GPU one delegate node, then the ops it left."""
    names = [("TfLiteGpuDelegateV2", "gpu")] if config != "cpu" else []
    names += [(op, "cpu") for op, _ in m.unsupported] if config != "cpu" else []
    names = names or [("CONV_2D", "cpu"), ("DEPTHWISE_CONV_2D", "cpu"), ("SOFTMAX", "cpu")]
    share = avg_us / 1000.0 / len(names)
    return [
        {
            "node": f"[out{i}]:{i}",
            "op": op,
            "backend": backend,
            "avg_ms": share,
            "first_ms": share * 3,
            "times_called": 1,
        }
        for i, (op, backend) in enumerate(names)
    ]


def _crash(rng: random.Random, d: DemoDevice) -> tuple[str, str]:
    if rng.random() < 0.2:
        return TIMED_OUT, "the job ran past its soft time limit"
    if d.renderer.startswith("Mali"):  # what the adb runner records for a delegate crash
        return FAILED, (
            f"ToolOutputError: benchmark_model on {d.key} gave no result: incomplete "
            "benchmark_model output: TfLiteGpuDelegate Invoke: CL_OUT_OF_RESOURCES"
        )
    return FAILED, "ModelError: GPU delegate failed to prepare: Unsupported tensor shape"


def seed(
    engine: Engine,
    campaigns: int = 6,
    extra_devices: int = 0,
    days: float = 30.0,
    rng_seed: int = 0,
    running_campaign: bool = True,
    more_models: int = 0,
) -> SeedSummary:
    """Write the demo lab into an (empty, migrated) farm database, the way the farm does.
    `more_models`: so many more models (extra_models) in the newest campaign, as a lab that
    grew its catalogue."""
    rng = random.Random(rng_seed)
    now = utcnow()
    devices = [*DEVICES, NEW_PHONE, *extra_phones(extra_devices)]
    measured = [d for d in devices if d is not NEW_PHONE]
    _register(engine, [_as_before_update(d) for d in devices])
    n_jobs = n_results = 0
    with tempfile.TemporaryDirectory() as folder:
        catalogue = [*MODELS, *extra_models(more_models)]
        paths = _write_models(Path(folder), catalogue)
        shas = {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in paths.items()}
        for c in range(campaigns):
            at = now - timedelta(days=days * (campaigns - 1 - c) / max(campaigns - 1, 1), hours=2)
            before_update = c < campaigns // 2
            if c == campaigns // 2:  # the Redmi's driver update: its agent registers new facts
                _register(engine, [d for d in devices if d.key == REDMI])
            newest = c == campaigns - 1
            if newest:
                for d in measured:
                    if d.state == "offline":
                        _go_silent(engine, d.key, now - timedelta(days=2))
            fleet = [
                _as_before_update(d) if before_update else d
                for d in measured
                if d.state == "online" or not newest
            ]
            models = catalogue if newest else list(MODELS)
            jobs_, results = _campaign(engine, rng, c, fleet, models, paths, shas, at, newest)
            n_jobs += jobs_
            n_results += results
        for d in measured:
            if d.health == QUARANTINED:  # what the agent records when a canary fails
                health.record(engine, d.key, health.HealthReport(False, d.health_reason), None)
        if running_campaign:
            n_jobs += _running_campaign(engine, measured, paths[MODELS[1].name], now)
    return SeedSummary(
        shas, [d.key for d in devices], campaigns + int(running_campaign), n_jobs, n_results
    )


def _as_before_update(d: DemoDevice) -> DemoDevice:
    return replace(d, **REDMI_BEFORE_UPDATE) if d.key == REDMI else d


def _write_models(folder: Path, models: Sequence[DemoModel]) -> dict[str, Path]:
    """The models as files (each a valid one-op model; `scale` makes the hashes differ)."""
    from delegate_runtime.examples import scaled_model

    paths = {}
    for m in models:
        paths[m.name] = folder / m.name
        paths[m.name].write_bytes(scaled_model(m.scale))
    return paths


def _register(engine: Engine, devices: Sequence[DemoDevice]) -> None:
    """Register devices as each host's agent does (facts, online now)."""
    url = engine.url.render_as_string(hide_password=False)
    for host in sorted({d.host for d in devices}):
        infos = [DeviceInfo(**d.row()) for d in devices if d.host == host]
        Agent(url, "unused://", infos, name=f"{host}-agent").register()


def _go_silent(engine: Engine, key: str, since: datetime) -> None:
    """A phone unplugged at `since`: no heartbeat after it, so the reconciler marks it
    offline (done here directly: the demo does not wait for the clock)."""
    with engine.begin() as conn:
        conn.execute(
            update(Device).where(Device.key == key).values(last_seen=since, state="offline")
        )


def _selector(engine: Engine, devices: Sequence[DemoDevice]) -> str:
    """A selector of exactly `devices`: their keys, or (a fleet too large to list) every
    registered device but the others."""
    listed = "key=" + "|".join(d.key for d in devices)
    if len(listed) <= MAX_SELECTOR_CHARS:
        return listed
    with engine.connect() as conn:
        others = set(conn.execute(select(Device.key)).scalars()) - {d.key for d in devices}
    return "key!=" + "|".join(sorted(others)) if others else "all"


def _job_ids(engine: Engine, campaign_id: int) -> dict[tuple[str, str, str], int]:
    """(model sha256, device, config) -> job id of a campaign."""
    with engine.begin() as conn:
        rows = conn.execute(
            select(Job.id, Job.model_sha256, Job.device_key, Job.config).where(
                Job.campaign_id == campaign_id
            )
        ).all()
    return {(sha, key, config): jid for jid, sha, key, config in rows}


def _campaign(
    engine: Engine,
    rng: random.Random,
    index: int,
    fleet: list[DemoDevice],
    models: Sequence[DemoModel],
    paths: dict[str, Path],
    shas: dict[str, str],
    at: datetime,
    newest: bool,
) -> tuple[int, int]:
    """One finished campaign: submitted at `at`, then every job claimed and finished by its
    device's worker with what the runner measured (executor.result_values writes it)."""
    sub = submit(
        engine,
        _Broker(),
        [paths[m.name] for m in models],
        _selector(engine, fleet),
        list(DEFAULT_CONFIGS),
        name=f"nightly #{index + 1}",
        now=at,
    )
    ids = _job_ids(engine, sub.campaign_id)
    host_cpu = {d.host: d for d in fleet if d.kind == "cpu"}
    t, results = at, 0
    with engine.begin() as conn:
        for m in models:
            for d in fleet:
                ref = host_cpu.get(d.host, d)
                cpu_ref_us = m.cpu_us * ref.cpu_factor
                # NOTE: the newest campaign brings a regression: mobilenet on the Pixel 4a.
                slow = 1.45 if newest and d.key == "android:pixel4a" and m is MODELS[0] else 1.0
                for config in KIND_CONFIGS[d.kind]:
                    t += timedelta(seconds=rng.uniform(5, 40))
                    state, error = SUCCEEDED, ""
                    if config != "cpu" and m.name in d.crashes:
                        state, error = _crash(rng, d)
                    outcome = (
                        _measure(rng, m, d, config, cpu_ref_us, slow)
                        if state == SUCCEEDED
                        else RunOutcome(versions=dict(VERSIONS))
                    )
                    job_id, worker = ids[(shas[m.name], d.key, config)], f"{d.host}-agent"
                    jobs.claim(conn, job_id, 1, worker, LEASE_S, now=t)
                    values = result_values(outcome, d.row(), JOB_S) | {"error": error}
                    done = t + timedelta(seconds=JOB_S)
                    results += jobs.finish(conn, job_id, 1, worker, state, values, now=done)
    return sub.jobs, results


class _Broker:
    """A broker that takes every message (the demo's workers are played in-process)."""

    def send(
        self, orders: Sequence[SendOrder], per_message: int = 1
    ) -> tuple[list[SendOrder], str]:
        return list(orders), ""


class _PartlySent:
    """A broker that takes the messages of some devices, then goes away."""

    def __init__(self, keys: set[str]):
        self.keys = keys

    def send(
        self, orders: Sequence[SendOrder], per_message: int = 1
    ) -> tuple[list[SendOrder], str]:
        took = [o for o in orders if o.device_key in self.keys]
        return took, "" if len(took) == len(orders) else "ConnectionError: demo broker went away"


def _running_campaign(engine: Engine, devices: list[DemoDevice], path: Path, now: datetime) -> int:
    """A campaign in progress: a third of its jobs running, a third queued (the broker
    went away), a third cancelled; no results yet."""
    online = [d for d in devices if d.kind != "cpu" and d.state == "online" and d.health == HEALTHY]
    running = {d.key for d in online[0::3]}
    cancelled = {d.key for d in online[2::3]}
    sub = submit(
        engine,
        _PartlySent(running | cancelled),
        [path],
        _selector(engine, online),
        "gpu-fp16",
        name="ssd re-run",
        now=now - timedelta(minutes=30),
    )
    ids = _job_ids(engine, sub.campaign_id)
    with engine.begin() as conn:
        for (_, key, _), job_id in sorted(ids.items()):
            if key in running:
                worker = f"{next(d.host for d in online if d.key == key)}-agent"
                jobs.claim(conn, job_id, 1, worker, LEASE_S, now=now - timedelta(minutes=2))
        jobs.cancel(conn, job_ids=[j for (_, k, _), j in ids.items() if k in cancelled])
    return sub.jobs
