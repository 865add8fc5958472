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
    write_manifest(zoo_folder, zoo._KERAS_SCRIPT.recipe())
    found = zoo.keras_model("MobileNetV2", "fp32")
    assert found == (zoo_folder / "MobileNetV2__fp32.tflite", (-1.0, 1.0))


@pytest.mark.parametrize("recipe", ["0123456789abcdef", None], ids=["older", "unrecorded"])
def test_a_file_of_another_recipe_is_stale(zoo_folder: Path, recipe: str | None) -> None:
    write_manifest(zoo_folder, recipe)
    assert zoo.keras_model("MobileNetV2", "fp32") is None


def test_the_builder_skips_only_current_files(zoo_folder: Path) -> None:
    script = zoo._KERAS_SCRIPT
    paths = {"fp32": zoo_folder / "MobileNetV2__fp32.tflite"}
    current = {"MobileNetV2__fp32.tflite": {"recipe": script.recipe()}}
    assert script.built_by_this_recipe(current, paths)
    assert not script.built_by_this_recipe({"MobileNetV2__fp32.tflite": {}}, paths)
    assert not script.built_by_this_recipe(current, {"fp16": zoo_folder / "absent.tflite"})
