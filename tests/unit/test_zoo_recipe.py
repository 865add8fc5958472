"""The Keras zoo is a cache keyed by its recipe: a file an older scripts/make_keras_zoo.py
built is stale (scripts/test.sh rebuilds it), never read as current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit import zoo


@pytest.fixture
def zoo_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEVICEFARM_ZOO_DIR", str(tmp_path))
    (tmp_path / "keras").mkdir()
    (tmp_path / "keras" / "MobileNetV2__fp32.tflite").write_bytes(b"TFL3")
    return tmp_path / "keras"


def write_manifest(folder: Path, recipe: str | None) -> None:
    entry = {"input_range": [-1.0, 1.0]} | ({"recipe": recipe} if recipe else {})
    (folder / "manifest.json").write_text(json.dumps({"MobileNetV2__fp32.tflite": entry}))


def test_a_file_of_this_recipe_is_read(zoo_folder: Path) -> None:
    write_manifest(zoo_folder, zoo.KERAS_SCRIPT.recipe())
    found = zoo.keras_model("MobileNetV2", "fp32")
    assert found == (zoo_folder / "MobileNetV2__fp32.tflite", (-1.0, 1.0))


@pytest.mark.parametrize("recipe", ["0123456789abcdef", None], ids=["older", "unrecorded"])
def test_a_file_of_another_recipe_is_stale(zoo_folder: Path, recipe: str | None) -> None:
    write_manifest(zoo_folder, recipe)
    assert zoo.keras_model("MobileNetV2", "fp32") is None


def test_the_builder_skips_only_current_files(zoo_folder: Path) -> None:
    script = zoo.KERAS_SCRIPT
    paths = {"fp32": zoo_folder / "MobileNetV2__fp32.tflite"}
    current = {"MobileNetV2__fp32.tflite": {"recipe": script.recipe()}}
    assert script.built_by_this_recipe(current, paths)
    assert not script.built_by_this_recipe({"MobileNetV2__fp32.tflite": {}}, paths)
    assert not script.built_by_this_recipe(current, {"fp16": zoo_folder / "absent.tflite"})


def _parallel_builder():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "make_keras_zoo_parallel.py"
    spec = importlib.util.spec_from_file_location("make_keras_zoo_parallel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_parallel_builder_builds_only_what_is_stale_dealt_to_its_processes(
    zoo_folder: Path,
) -> None:
    builder = _parallel_builder()
    write_manifest(zoo_folder, zoo.KERAS_SCRIPT.recipe())  # MobileNetV2's fp32 only
    names = builder.to_build(zoo.KERAS_SCRIPT, zoo_folder)
    assert names == [m.name for m in zoo.KERAS_SCRIPT.ZOO]  # its fp16 and int8 are missing
    assert builder.split(["a", "b", "c", "d", "e"], 2) == [["a", "d", "e"], ["b", "c"]]
    assert builder.split(["a"], 4) == [["a"]]


def test_the_parallel_builder_merges_its_parts(tmp_path: Path) -> None:
    builder = _parallel_builder()
    out, parts = tmp_path / "out", [tmp_path / "p0", tmp_path / "p1"]
    for folder, name in zip([out, *parts], ["old", "a", "b"], strict=True):
        folder.mkdir()
        (folder / f"{name}.tflite").write_bytes(name.encode())
        (folder / "manifest.json").write_text(json.dumps({f"{name}.tflite": {"recipe": name}}))
    builder.merge(parts, out)
    assert sorted(p.name for p in out.glob("*.tflite")) == ["a.tflite", "b.tflite", "old.tflite"]
    assert json.loads((out / "manifest.json").read_text()) == {
        f"{n}.tflite": {"recipe": n} for n in ("old", "a", "b")
    }
