"""The deployment files (deploy/, issue 17): compose.yaml parsed with PyYAML (no Docker
here), every service's command parsed by the real `devicefarm` argument parser, the agent's
systemd unit checked by `systemd-analyze verify`."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devicefarm.cli import build_parser
from tests.conftest import require, require_module

yaml = require_module("yaml", "PyYAML")

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
UNIT = DEPLOY / "systemd" / "devicefarm-agent.service"
FARM_SERVICES = ("migrate", "api", "reconciler", "dashboard")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def test_compose_has_the_lab_services(compose) -> None:
    assert set(services(compose)) == {"redis", "postgres", *FARM_SERVICES}


def test_redis_is_append_only_on_a_named_volume(compose) -> None:
    redis = services(compose)["redis"]
    command = redis["command"]
    assert command[0] == "redis-server"
    assert command[command.index("--appendonly") + 1] == "yes"
    volume, _, target = redis["volumes"][0].partition(":")
    assert target == "/data" and volume in compose["volumes"]


def test_postgres_keeps_its_data_on_a_named_volume(compose) -> None:
    pg = services(compose)["postgres"]
    volume, _, target = pg["volumes"][0].partition(":")
    assert target == "/var/lib/postgresql/data" and volume in compose["volumes"]
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])


def test_migrate_is_a_one_shot_step(compose) -> None:
    migrate = services(compose)["migrate"]
    assert migrate["command"] == ["devicefarm", "db", "upgrade"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", ["api", "reconciler", "dashboard"])
def test_servers_start_after_the_migration_succeeded(compose, name: str) -> None:
    depends = services(compose)[name]["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    assert depends["redis"]["condition"] == "service_healthy"
    assert services(compose)[name]["restart"] == "unless-stopped"


@pytest.mark.parametrize("name", FARM_SERVICES)
def test_service_commands_parse(compose, name: str) -> None:
    """Each command is one the installed `devicefarm` accepts, with these options."""
    command = services(compose)[name]["command"]
    assert command[0] == "devicefarm"
    argv = command[1:]
    args = build_parser(argv).parse_args(argv)
    assert getattr(args, "_module", None), f"{argv[0]} is not a devicefarm command"


def test_reconciler_loops(compose) -> None:
    command = services(compose)["reconciler"]["command"]
    assert command[1] == "reconcile" and "--every" in command


@pytest.mark.parametrize("name", FARM_SERVICES)
def test_farm_services_share_the_database_broker_and_users(compose, name: str) -> None:
    env = services(compose)[name]["environment"]
    assert env["DEVICEFARM_DB"].startswith("postgresql://")
    assert "@postgres:5432/" in env["DEVICEFARM_DB"]
    assert (
        env["DEVICEFARM_BROKER"].startswith("redis://")
        and "@redis:6379/" in env["DEVICEFARM_BROKER"]
    )
    assert env["DEVICEFARM_TOKENS"] == "/etc/devicefarm/tokens.json"


def test_dashboard_signs_its_cookies_with_a_set_secret(compose) -> None:
    env = services(compose)["dashboard"]["environment"]
    assert env["DEVICEFARM_DASHBOARD_SECRET"].startswith("${DASHBOARD_SECRET:?")


def test_every_compose_variable_is_in_the_env_example() -> None:
    used = set(re.findall(r"\$\{(\w+)", (DEPLOY / "compose.yaml").read_text()))
    example = (DEPLOY / "env.example").read_text()
    defined = set(re.findall(r"^(\w+)=", example, re.M))
    assert used <= defined, used - defined


def test_dockerfile_copies_what_exists() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (.+) \S+$", text, re.M):
        for path in source.split():
            assert (REPO / path).exists(), path
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    build = compose["x-devicefarm"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def unit_sections() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def test_agent_unit_runs_the_worker_with_its_env_file() -> None:
    unit = unit_sections()
    assert set(unit.sections()) == {"Unit", "Service", "Install"}
    service = unit["Service"]
    exec_start = shlex.split(service["ExecStart"])
    assert exec_start[0].endswith("/bin/devicefarm") and exec_start[1] == "worker"
    assert service["EnvironmentFile"] == "/etc/devicefarm/agent.env"
    assert service["Restart"] in ("always", "on-failure") and service["KillMode"] == "mixed"
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_agent_env_example_parses_as_worker_options() -> None:
    text = (DEPLOY / "systemd" / "devicefarm-agent.env.example").read_text()
    env = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    assert env["DEVICEFARM_DB"].startswith("postgresql://")
    assert env["DEVICEFARM_BROKER"].startswith("redis://")
    argv = ["worker", *shlex.split(env["DEVICEFARM_AGENT_ARGS"])]
    assert build_parser(argv).parse_args(argv).devices == ["opencl", "cpu", "android"]


def test_agent_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """systemd's own check, with ExecStart pointed at this checkout's devicefarm (verify
    refuses a missing executable); it prints nothing for a clean unit."""
    analyze = shutil.which("systemd-analyze")
    require(analyze is not None, "systemd-analyze")
    devicefarm = Path(sys.executable).parent / "devicefarm"
    require(devicefarm.exists(), "the devicefarm console script")
    copy = tmp_path / UNIT.name
    copy.write_text(
        UNIT.read_text().replace("/opt/devicefarm/venv/bin/devicefarm", str(devicefarm))
    )
    r = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
