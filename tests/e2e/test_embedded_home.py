"""The embedded farm has one home: every command finds it from any folder.

Run as a user would: `devicefarm` processes with HOME pointing at a temporary user, no
DEVICEFARM_* variable set, from different working folders.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """The environment of a user whose home folder is tmp_path/user, with no farm yet."""
    (tmp_path / "user").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVICEFARM_", "XDG_"))}
    return env | {"HOME": str(tmp_path / "user"), "PYTHONPATH": str(REPO)}


def devicefarm(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "devicefarm", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_farm_made_in_one_folder_is_found_from_another(tmp_path: Path, user: dict) -> None:
    made = devicefarm(["db", "upgrade"], tmp_path / "a", user)
    assert made.returncode == 0, made.stderr
    data_home = tmp_path / "user" / ".local" / "share" / "devicefarm"
    assert f"a new embedded farm in {data_home}" in made.stderr  # said on first use
    assert (data_home / "farm.db").is_file()
    assert not (tmp_path / "a" / ".devicefarm").exists()

    seen = devicefarm(["status"], tmp_path / "b", user)
    assert seen.returncode == 0, seen.stderr
    again = devicefarm(["db", "upgrade"], tmp_path / "b", user)
    assert again.returncode == 0 and "a new embedded farm" not in again.stderr


def test_home_names_the_farm_before_or_after_the_subcommand(tmp_path: Path, user: dict) -> None:
    lab = tmp_path / "lab-farm"
    made = devicefarm(["--home", str(lab), "db", "upgrade"], tmp_path / "a", user)
    assert made.returncode == 0, made.stderr
    assert f"a new embedded farm in {lab}" in made.stderr and (lab / "farm.db").is_file()
    assert devicefarm(["status", "--home", str(lab)], tmp_path / "b", user).returncode == 0
    # the user's default home stays empty
    missing = devicefarm(["status"], tmp_path / "b", user)
    assert missing.returncode == 2 and "no farm in " in missing.stderr


def test_the_xdg_data_home_is_respected(tmp_path: Path, user: dict) -> None:
    env = user | {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    made = devicefarm(["db", "upgrade"], tmp_path / "a", env)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "xdg" / "devicefarm" / "farm.db").is_file()


def test_a_farm_an_earlier_version_left_in_the_folder_is_pointed_out(
    tmp_path: Path, user: dict
) -> None:
    old = tmp_path / "project" / ".devicefarm"
    made = devicefarm(["--home", str(old), "db", "upgrade"], tmp_path / "project", user)
    assert made.returncode == 0, made.stderr

    fresh = devicefarm(["db", "upgrade"], tmp_path / "project", user)
    assert fresh.returncode == 0, fresh.stderr
    assert f"{old} holds a farm from an earlier version: --home {old} uses it" in fresh.stderr
