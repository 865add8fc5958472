"""Configurations as data: presets keep their stored names, explicit forms are normalised
to one canonical string, bad forms are refused with the choices, and a phone's recorded
accelerators decide what it runs (farm_core.configs, farm_core.device_support)."""

from __future__ import annotations

import pytest

from farm_core.configs import (
    CONFIG_CHARS,
    CONFIGS,
    canonical,
    parse_config,
    parse_configs,
    stored_config,
    supports,
)


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("cpu", "cpu"),
        ("gpu-fp32", "gpu-fp32"),
        ("gpu-fp16", "gpu-fp16"),
        ("gpu", "gpu-fp32"),
        ("gpu:precision=fp32", "gpu-fp32"),
        ("gpu:precision=fp16", "gpu-fp16"),
        ("GPU:Precision=FP16", "gpu-fp16"),
        ("gpu:quant=true;precision=fp16", "gpu-fp16"),
        ("gpu:precision=fp16;backend=gl", "gpu:backend=gl;precision=fp16"),
        ("gpu:backend=gl;precision=fp16", "gpu:backend=gl;precision=fp16"),
        ("nnapi", "nnapi"),
        ("nnapi:fp16=1;accelerator=google-edgetpu", "nnapi:accelerator=google-edgetpu;fp16=true"),
        ("nnapi:fp16=false", "nnapi"),
        ("xnnpack:threads=04", "xnnpack:threads=4"),
        ("hexagon", "hexagon"),
        ("cpu:threads=2", "cpu:threads=2"),
    ],
)
def test_canonical_form(written: str, stored: str) -> None:
    assert canonical(written) == stored


@pytest.mark.parametrize(
    ("written", "words"),
    [
        ("tpu", ["unknown configuration 'tpu'", "gpu-fp16", "nnapi (accelerator=NAME"]),
        ("gpu:backend=vulkan", ["backend takes one of cl, gl"]),
        ("gpu:colour=red", ["gpu has no option 'colour'", "precision, backend"]),
        ("nnapi:fp16=maybe", ["fp16 takes true or false"]),
        ("nnapi:accelerator=a b", ["accelerator takes a name"]),
        ("nnapi:accelerator", ["write accelerator=VALUE"]),
        ("xnnpack:threads=0", ["threads takes a whole number 1..64"]),
        ("hexagon:fp16=true", ["hexagon has no option 'fp16'", "options: profiling"]),
        ("gpu:precision=fp16;precision=fp32", ["option precision is given twice"]),
        ("cpu:", ["nothing after ':'"]),
    ],
)
def test_bad_form_names_the_choices(written: str, words: list[str]) -> None:
    config, errors = parse_config(written)
    assert config is None
    text = " | ".join(errors)
    for w in words:
        assert w in text


def test_one_configuration_in_two_spellings_is_given_twice() -> None:
    configs, errors = parse_configs("gpu-fp16,gpu:precision=fp16")
    assert [c.name for c in configs] == ["gpu-fp16"]
    assert errors == ["configuration 'gpu:precision=fp16' is given twice (as 'gpu-fp16')"]


def test_repeated_configs_flags_are_one_list() -> None:
    configs, errors = parse_configs(["cpu,gpu-fp16", "nnapi:accelerator=qti-dsp;fp16=true"])
    assert errors == []
    assert [c.name for c in configs] == ["cpu", "gpu-fp16", "nnapi:accelerator=qti-dsp;fp16=true"]


def test_canonical_names_fit_the_column() -> None:
    from farm_core.schema import Job, Result

    longest = canonical(
        "nnapi:accelerator=" + "a" * 40 + ";preference=fast_single_answer;fp16=true"
    )
    assert len(longest) <= CONFIG_CHARS
    assert Job.__table__.c.config.type.length == CONFIG_CHARS
    assert Result.__table__.c.config.type.length == CONFIG_CHARS


def test_stored_canonical_names_resolve_and_other_spellings_do_not() -> None:
    c = stored_config("nnapi:accelerator=google-edgetpu;fp16=true")
    assert (c.delegate, c.option("accelerator"), c.precision) == ("nnapi", "google-edgetpu", "fp16")
    assert list(CONFIGS) == ["cpu", "gpu-fp32", "gpu-fp16"]
    with pytest.raises(KeyError):
        stored_config("nnapi:fp16=true;accelerator=google-edgetpu")  # not the canonical order


@pytest.mark.parametrize(
    ("kind", "config", "ok", "words"),
    [
        ("opencl", "gpu-fp16", True, ""),
        ("opencl", "gpu:backend=cl", True, ""),
        ("opencl", "gpu:backend=gl", False, "OpenCL only"),
        ("opencl", "nnapi", False, "opencl devices run the gpu delegates"),
        ("opencl", "cpu", False, "not cpu"),
        ("cpu", "cpu", True, ""),
        ("cpu", "cpu:threads=4", False, "single-threaded"),
        ("cpu", "hexagon", False, "cpu devices run the cpu delegates"),
        ("android", "hexagon", True, ""),
        ("tpu", "cpu", False, "no runner for device kind 'tpu'"),
    ],
)
def test_kind_supports(kind: str, config: str, ok: bool, words: str) -> None:
    got, why = supports(kind, config)
    assert got is ok
    assert words in why


_WITH = {
    "ro.build.version.sdk": "33",
    "accelerators": {
        "gpu_backends": ["cl", "gl"],
        "nnapi_devices": ["qti-dsp", "qti-gpu", "nnapi-reference"],
        "hexagon": {
            "interface": "/vendor/lib64/libhexagon_interface.so",
            "skel_dir": "/vendor/lib/rfsa/adsp",
            "skel": ["libhexagon_nn_skel.so"],
        },
    },
}
_WITHOUT = {
    "ro.build.version.sdk": "34",
    "accelerators": {
        "gpu_backends": ["cl", "gl"],
        "nnapi_devices": ["google-edgetpu", "nnapi-reference"],
        "hexagon": {},
    },
}


@pytest.mark.parametrize(
    ("facts", "config", "ok", "words"),
    [
        (_WITH, "hexagon", True, ""),
        (_WITHOUT, "hexagon", False, "Could not create Hexagon delegate: platform may not"),
        (_WITHOUT, "hexagon", False, "no libhexagon_interface.so, libhexagon_nn_skel*.so"),
        (_WITH, "nnapi:accelerator=qti-dsp", True, ""),
        (
            _WITH,
            "nnapi:accelerator=google-edgetpu",
            False,
            "Could not find the specified NNAPI accelerator: google-edgetpu. Must be one of: "
            "{qti-dsp,qti-gpu,nnapi-reference}.",
        ),
        (_WITHOUT, "nnapi:accelerator=google-edgetpu", True, ""),
        ({**_WITH, "ro.build.version.sdk": "28"}, "nnapi:accelerator=qti-dsp", False, "API 29"),
        (
            {**_WITH, "ro.build.version.sdk": "26"},
            "nnapi",
            False,
            "NNAPI acceleration is unsupported",
        ),
        ({"accelerators": {"gpu_backends": ["gl"]}}, "gpu:backend=cl", False, "offers gl"),
        ({"accelerators": {"gpu_backends": ["gl"]}}, "gpu-fp16", True, ""),
        ({}, "gpu-fp16", True, ""),
        ({}, "hexagon", False, "accelerators are unknown"),
        ({}, "xnnpack:threads=4", True, ""),
    ],
)
def test_phone_supports_from_its_facts(facts: dict, config: str, ok: bool, words: str) -> None:
    got, why = supports("android", config, facts)
    assert got is ok
    assert words in why
