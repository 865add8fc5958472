"""Allowlist rules: each reason, the best options, merging, facts → variables."""

from __future__ import annotations

import pytest

from orchestrator.allowlist.canonical import canonical_value
from orchestrator.allowlist.facts import (
    DEVICE_MODEL,
    DRIVER,
    GLES_VERSION,
    GPU_MODEL,
    GPU_VENDOR,
    SDK,
    list_variables,
)
from orchestrator.allowlist.rules import (
    CRASHED,
    ERROR_TOO_LARGE,
    FELL_BACK,
    NOT_MEASURED,
    SLOWER_THAN_CPU,
    SUPPORTED,
    UNKNOWN,
    UNSTABLE,
    UNSUPPORTED,
    ConfigStats,
    Decision,
    Evidence,
    Thresholds,
    decide,
    merge,
)

CPU_US = 10_000.0


def stats(config: str = "gpu-fp16", **kw) -> ConfigStats:
    base = dict(ok=3, mean_us=2_000.0, cv=0.02, worst_run_cv=0.05, max_error=1e-4, fell_back=0,
                min_error=1e-5, diffs=3)  # fmt: skip
    return ConfigStats(config, **(base | kw))


def evidence(*configs: ConfigStats, cpu_us: float | None = CPU_US) -> Evidence:
    return Evidence({c.config: c for c in configs}, cpu_us)


def test_supported_picks_the_fastest_configuration() -> None:
    d = decide(evidence(stats("gpu-fp16"), stats("gpu-fp32", mean_us=4_000.0)), Thresholds())
    assert (d.status, d.precision, d.config) == (SUPPORTED, "fp16", "gpu-fp16")
    assert d.speedup == pytest.approx(5.0) and d.enable_quant is True


@pytest.mark.parametrize(
    ("changes", "thresholds", "code"),
    [
        ({"failed": 2, "ok": 0}, Thresholds(), CRASHED),
        ({"fell_back": 2, "total_ops": 31}, Thresholds(require_full_delegation=True), FELL_BACK),
        ({"cv": 0.6}, Thresholds(), UNSTABLE),
        ({"worst_run_cv": 0.9}, Thresholds(), UNSTABLE),
        ({"max_error": 0.5, "min_error": 0.4}, Thresholds(), ERROR_TOO_LARGE),
        ({"max_error": 2e-3, "min_error": 2e-3}, Thresholds(max_error=1e-3), ERROR_TOO_LARGE),
        ({"mean_us": 9_000.0}, Thresholds(min_speedup=1.2), SLOWER_THAN_CPU),
    ],
)
def test_each_reason(changes: dict, thresholds: Thresholds, code: str) -> None:
    d = decide(evidence(stats(**changes)), thresholds)
    assert (d.status, d.code) == (UNSUPPORTED, code)
    assert d.reason.startswith("gpu-fp16: ")


def test_fallback_is_allowed_unless_full_delegation_is_required() -> None:
    ev = evidence(stats(fell_back=3, total_ops=31))
    assert decide(ev, Thresholds()).status == SUPPORTED
    assert "3 of 31 ops" in decide(ev, Thresholds(require_full_delegation=True)).reason


def test_fp16_error_limit_is_looser_than_fp32() -> None:
    ev = evidence(stats("gpu-fp16", max_error=5e-3), stats("gpu-fp32", max_error=5e-3))
    d = decide(ev, Thresholds())
    assert (d.status, d.precision) == (SUPPORTED, "fp16")


def test_a_failing_fp16_falls_back_to_fp32() -> None:
    ev = evidence(
        stats("gpu-fp16", max_error=0.2, min_error=0.2), stats("gpu-fp32", mean_us=3_000.0)
    )
    d = decide(ev, Thresholds())
    assert (d.status, d.precision) == (SUPPORTED, "fp32")


@pytest.mark.parametrize(
    ("ev", "why"),
    [
        (Evidence(), "no GPU configuration"),
        (evidence(stats(ok=1)), "1 of 3 runs"),
        (evidence(stats(max_error=None)), "no inference diff"),
        (evidence(stats(), cpu_us=None), "no CPU baseline"),
        # never evidence: the farm's trouble, or not repeated, or beside a pass
        (evidence(stats(ok=0, timed_out=2, infra=1)), "3 infrastructure failures"),
        (evidence(stats(ok=0, failed=1, error="boom")), "(boom): 1 device-caused failure, 2"),
        (evidence(stats(ok=1, failed=2, max_error=1e-4)), "crashed in 2 of 3 results"),
        (evidence(stats(ok=3, max_error=0.5, min_error=1e-5)), "some results, passed in others"),
        (evidence(stats(ok=1, diffs=1, max_error=0.5, min_error=0.5)), "2 needed"),
        (evidence(stats(ok=1, mean_us=9_000.0)), "1.11x over CPU, needs 1.20x in 1 result"),
    ],
)
def test_unknown(ev: Evidence, why: str) -> None:
    d = decide(ev, Thresholds(min_runs=3 if "runs" in why else 1))
    assert (d.status, d.code) == (UNKNOWN, NOT_MEASURED) and why in d.reason


def test_most_severe_reason_is_reported() -> None:
    ev = evidence(
        stats("gpu-fp16", max_error=1.0, min_error=1.0),
        stats("gpu-fp32", ok=0, failed=2, error="boom\nx"),
    )
    d = decide(ev, Thresholds())
    assert d.code == CRASHED and "boom" in d.reason and "error" in d.reason


def test_merge_is_conservative() -> None:
    ok16 = Decision(SUPPORTED, config="gpu-fp16", precision="fp16", enable_quant=True, speedup=3)
    ok32 = Decision(SUPPORTED, config="gpu-fp32", precision="fp32", enable_quant=True, speedup=2)
    bad = Decision(UNSUPPORTED, CRASHED, "gpu-fp16: crashed")
    assert merge([ok16, ok32]).precision == "fp32" and merge([ok16, ok32]).speedup == 2
    assert merge([ok16, bad]).status == UNSUPPORTED
    assert merge([ok16, Decision(UNKNOWN, NOT_MEASURED)]).status == UNKNOWN


def test_canonical_value_is_tflites() -> None:
    assert canonical_value("Adreno (TM) 640") == "adreno_(tm)_640"
    assert canonical_value("SM-A525F") == "sm_a525f"
    assert canonical_value("Ünï Çode") == "Ünï_Çode"  # ASCII only, as absl::ascii_tolower


def test_list_variables_android_and_opencl() -> None:
    phone = {
        "kind": "android",
        "vendor": "google",
        "model": "Pixel 4a",
        "renderer": "Adreno (TM) 618",
        "driver_version": "OpenGL ES 3.2 V@415.0",
        "api_version": "OpenGL ES 3.2",
        "android_sdk": 30,
        "facts": {"ro.product.device": "sunfish"},
    }
    v = list_variables(phone)
    assert v[GPU_MODEL] == "adreno_(tm)_618" and v[SDK] == "30" and v[GLES_VERSION] == "3.2"
    assert v[DEVICE_MODEL] == "pixel_4a" and v[DRIVER] == "opengl_es_3.2_v@415.0"
    gpu = {"kind": "opencl", "vendor": "nvidia", "renderer": "RTX 3080", "driver_version": "550"}
    assert list_variables(gpu) == {GPU_MODEL: "rtx_3080", DRIVER: "550", GPU_VENDOR: "nvidia"}
