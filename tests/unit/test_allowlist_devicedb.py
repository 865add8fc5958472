"""The devicedb flatbuffer and JSON, and the reader's walk (TFLite's devicedb.cc)."""

from __future__ import annotations

import json
import random

import pytest

from orchestrator.allowlist import devicedb, reader
from orchestrator.allowlist.facts import ORDER, RUNTIME_VARIABLES, SDK, signature
from orchestrator.allowlist.rules import (
    CRASHED,
    SUPPORTED,
    UNKNOWN,
    UNSUPPORTED,
    Decision,
)
from orchestrator.allowlist.tree import (
    EQUAL,
    MAXIMUM,
    MINIMUM,
    PRECISION,
    STATUS,
    Edge,
    Node,
)

#: TFLite's devicedb-sample.json, abridged: a root deriving soc_model, then a tree on it.
SAMPLE = {
    "root": [
        {
            "variable": "tflite.device_model",
            "items": [
                {
                    "value": "m712c",
                    "derived_properties": [
                        {"variable": "tflite.soc_model", "value": "exynos_7872"}
                    ],
                }
            ],
        },
        {
            "variable": "tflite.soc_model",
            "items": [
                {
                    "value": "exynos_7872",
                    "children": [
                        {
                            "variable": "tflite.android_sdk_version",
                            "comparison": "MINIMUM",
                            "items": [
                                {
                                    "value": "24",
                                    "derived_properties": [
                                        {"variable": STATUS, "value": "SUPPORTED"}
                                    ],
                                }
                            ],
                        }
                    ],
                }
            ],
        },
    ]
}

OK = Decision(SUPPORTED, config="gpu-fp16", precision="fp16", enable_quant=True, speedup=2.0)
OK32 = Decision(SUPPORTED, config="gpu-fp32", precision="fp32", enable_quant=True, speedup=1.5)
BAD = Decision(UNSUPPORTED, CRASHED, "gpu-fp16: crashed")
UNK = Decision(UNKNOWN, "not_measured", "not measured")


def test_sample_walk_derives_then_decides() -> None:
    roots = devicedb.from_json(json.dumps(SAMPLE))
    assert reader.status(roots, {"tflite.device_model": "M712C", SDK: "28"}) == SUPPORTED
    assert reader.status(roots, {"tflite.device_model": "m712c", SDK: "23"}) == UNKNOWN
    assert reader.status(roots, {"tflite.device_model": "other", SDK: "28"}) == UNKNOWN


def test_flatbuffer_round_trip_and_flatc_json() -> None:
    roots = devicedb.from_json(json.dumps(SAMPLE))
    data = devicedb.encode(roots)
    again = devicedb.decode(data)
    assert again == roots
    text = devicedb.to_json(again)
    assert json.loads(text) == SAMPLE | {"root": [SAMPLE["root"][0], _ordered(SAMPLE["root"][1])]}
    assert text.endswith("}\n") and '"comparison": "MINIMUM"' in text


def _ordered(node: dict) -> dict:
    """flatc prints fields in schema order: variable, comparison, items."""
    return {k: node[k] for k in ("variable", "comparison", "items") if k in node}


def test_decode_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        devicedb.decode(b"\xff\xff\xff\x7f")


def test_equal_uses_binary_search_like_lookup_by_key() -> None:
    unsorted = Node("v", EQUAL, [Edge("b"), Edge("c"), Edge("a")])
    assert reader.find(unsorted, "a") == []  # as TFLite: unsorted keys are not found
    assert reader.find(Node("v", EQUAL, [Edge("a"), Edge("b"), Edge("c")]), "a")


def test_minimum_and_maximum_compare_strings() -> None:
    items = [Edge("10"), Edge("9")]
    assert [e.value for e in reader.find(Node("v", MINIMUM, items), "10")] == ["10"]
    assert [e.value for e in reader.find(Node("v", MAXIMUM, items), "10")] == ["10", "9"]


def test_later_properties_overwrite() -> None:
    roots = [
        Node("a", EQUAL, [Edge("1", derived_properties=[(STATUS, "SUPPORTED")])]),
        Node("a", EQUAL, [Edge("1", derived_properties=[(STATUS, "UNSUPPORTED")])]),
    ]
    assert reader.status(roots, {"a": "1"}) == UNSUPPORTED


def test_values_are_canonical_and_items_sorted() -> None:
    v = {"tflite.gpu_model": "adreno_(tm)_640", "tflite.opengl_driver_version": "v@415.0"}
    w = v | {"tflite.opengl_driver_version": "v@0490.0"}
    roots = devicedb.build_tree([(v, OK), (w, BAD)])
    reset, driver = roots[0].items[0].children  # the unmeasured-driver reset, then drivers
    assert (reset.comparison, [e.value for e in reset.items]) == (MINIMUM, [""])
    assert [e.value for e in driver.items] == ["v@0490.0", "v@415.0"]
    assert (
        reader.status(
            roots,
            {"tflite.gpu_model": "Adreno (TM) 640", **{"tflite.opengl_driver_version": "V@415.0"}},
        )
        == SUPPORTED
    )


def test_stock_app_without_driver_gets_the_conservative_answer() -> None:
    base = {"tflite.gpu_model": "mali_g710", SDK: "33"}
    roots = devicedb.build_tree(
        [
            (base | {"tflite.opengl_driver_version": "r38"}, OK),
            (base | {"tflite.opengl_driver_version": "r40"}, OK32),
        ]
    )
    got = reader.evaluate(roots, base)
    assert got[STATUS] == "SUPPORTED" and got[PRECISION] == "fp32"
    roots = devicedb.build_tree(
        [
            (base | {"tflite.opengl_driver_version": "r38"}, OK),
            (base | {"tflite.opengl_driver_version": "r40"}, BAD),
        ]
    )
    assert reader.status(roots, base) == UNSUPPORTED
    assert reader.status(roots, base | {"tflite.opengl_driver_version": "r38"}) == SUPPORTED


def test_sdk_ranges_carry_decisions_where_measured() -> None:
    base = {"tflite.gpu_model": "adreno_(tm)_618"}
    roots = devicedb.build_tree([(base | {SDK: "29"}, BAD), (base | {SDK: "31"}, OK)])
    assert reader.status(roots, base | {SDK: "33"}) == SUPPORTED  # newest supported: MINIMUM
    assert reader.status(roots, base | {SDK: "30"}) == UNKNOWN  # between two decisions
    assert reader.status(roots, base | {SDK: "28"}) == UNSUPPORTED  # oldest unsupported: MAXIMUM
    text = devicedb.to_json(roots)
    assert '"comparison": "MINIMUM"' in text and '"comparison": "MAXIMUM"' in text
    exact = devicedb.build_tree([(base | {SDK: "29"}, BAD), (base | {SDK: "31"}, OK)], False)
    assert reader.status(exact, base | {SDK: "33"}) == UNKNOWN


def test_sdk_range_between_equal_decisions() -> None:
    base = {"tflite.gpu_model": "mali_g57"}
    entries = [(base | {SDK: s}, d) for s, d in (("28", OK), ("30", OK), ("33", BAD))]
    roots = devicedb.build_tree(entries)
    assert reader.status(roots, base | {SDK: "29"}) == SUPPORTED  # between 28 and 30, both OK
    assert reader.status(roots, base | {SDK: "31"}) == UNKNOWN
    assert reader.status(roots, base | {SDK: "34"}) == UNKNOWN  # newest unsupported: no range
    assert reader.status(roots, base | {SDK: "27"}) == UNKNOWN  # oldest supported: no range


def test_sdk_ranges_stop_at_an_unknown_device() -> None:
    base = {"tflite.gpu_model": "mali_g57"}
    entries = [(base | {SDK: s}, d) for s, d in (("28", OK), ("30", OK), ("33", UNK))]
    roots = devicedb.build_tree(entries)
    assert reader.status(roots, base | {SDK: "33"}) == UNKNOWN
    assert reader.status(roots, base | {SDK: "29"}) == SUPPORTED
    assert reader.status(roots, base | {SDK: "31"}) == UNKNOWN  # not newest: no MINIMUM
    assert reader.status(roots, base | {SDK: "34"}) == UNKNOWN


def test_sdk_ranges_need_two_digit_values() -> None:
    base = {"tflite.gpu_model": "adreno_(tm)_618"}
    odd = devicedb.build_tree([(base | {SDK: "9"}, BAD), (base | {SDK: "31"}, OK)])
    assert "MINIMUM" not in devicedb.to_json(odd)  # "9" > "31" as strings: EQUAL only


def test_an_unmeasured_driver_does_not_inherit() -> None:
    base = {"tflite.gpu_model": "mali_g710", SDK: "33"}
    roots = devicedb.build_tree([(base | {"tflite.opengl_driver_version": "r38"}, OK)])
    assert reader.status(roots, base) == SUPPORTED  # a stock app passes no driver
    assert reader.status(roots, base | {"tflite.opengl_driver_version": "r38"}) == SUPPORTED
    assert reader.status(roots, base | {"tflite.opengl_driver_version": "r41"}) == UNKNOWN
    newer_sdk = base | {SDK: "34", "tflite.opengl_driver_version": "r41"}
    assert reader.status(roots, newer_sdk) == UNKNOWN
    assert reader.status(roots, base | {SDK: "34"}) == SUPPORTED


def _random_entries(rng: random.Random) -> list[tuple[dict[str, str], Decision]]:
    values = {v: [f"{v[-3:]}{i}" for i in range(2)] for v in ORDER}
    values[SDK] = ["28", "30", "33"]
    seen, out = set(), []
    for _ in range(rng.randint(2, 14)):
        present = [v for v in ORDER if rng.random() < 0.6] or [ORDER[0]]
        var = {v: rng.choice(values[v]) for v in present}
        if signature(var) in seen:
            continue
        seen.add(signature(var))
        out.append((var, rng.choice([OK, OK32, BAD, UNK, UNK])))
    return out


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("sdk_ranges", [False, True])
def test_reader_agrees_on_random_fleets(seed: int, sdk_ranges: bool) -> None:
    """Devices with any subset of facts: every listed device reads back its decision."""
    entries = _random_entries(random.Random(seed))
    roots = devicedb.decode(devicedb.encode(devicedb.build_tree(entries, sdk_ranges)))
    for var, d in entries:
        got = reader.evaluate(roots, var)
        assert reader.status(roots, var) == d.status, (var, d)
        if d.status == SUPPORTED:
            assert got[PRECISION] == d.precision


def test_runtime_variables_come_first() -> None:
    assert ORDER[: len(RUNTIME_VARIABLES)] == RUNTIME_VARIABLES
