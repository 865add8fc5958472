"""The API server's limits: defaults, environment, flags (issue 42)."""

from __future__ import annotations

import argparse
import resource

import pytest

from api import serve_settings
from api.serve_settings import KNOBS, ServeSettings, from_args, from_env


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    serve_settings.add_arguments(p)
    return p


def test_every_setting_has_one_knob_and_a_flag() -> None:
    fields = [f.name for f in ServeSettings.__dataclass_fields__.values()]
    assert [k.field for k in KNOBS] == fields
    assert len({k.env for k in KNOBS}) == len(KNOBS)
    help_text = parser().format_help()
    assert all(f"--{f.replace('_', '-')}" in help_text for f in fields)


def test_the_environment_then_the_flags() -> None:
    env = {"DEVICEFARM_API_HEADER_TIMEOUT_S": "4", "DEVICEFARM_API_RATE_PER_CLIENT": "7.5"}
    args = parser().parse_args(["--rate-per-client", "0", "--max-connections", "9"])
    settings = from_args(args, env)
    assert settings.header_timeout_s == 4.0
    assert settings.rate_per_client == 0.0 and settings.max_connections == 9
    assert settings.keep_alive_s == ServeSettings().keep_alive_s


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("DEVICEFARM_API_HEADER_TIMEOUT_S", "soon"),
        ("DEVICEFARM_API_HEADER_TIMEOUT_S", "0"),
        ("DEVICEFARM_API_MAX_CONNECTIONS", "1.5"),
        ("DEVICEFARM_API_RATE_PER_TOKEN", "-1"),
        ("DEVICEFARM_API_RATE_PER_TOKEN", "inf"),
    ],
)
def test_a_bad_variable_is_named(name: str, raw: str) -> None:
    with pytest.raises(ValueError, match=name):
        from_env({name: raw})


def test_a_bad_flag_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["--header-timeout-s", "-3"])
    assert exc.value.code == 2
    assert "--header-timeout-s" in capsys.readouterr().err


def test_connections_are_fitted_to_the_open_file_limit() -> None:
    from api.server import SPARE_FDS, fit_open_files

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard open-file limit here")
    fitted, note = fit_open_files(ServeSettings(max_connections=hard + 10))
    assert fitted.max_connections == hard - SPARE_FDS and "ulimit" in note
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
