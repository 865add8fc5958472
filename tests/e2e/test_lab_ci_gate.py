"""A CI job against a lab stood up from the deployment files (issue 17's "done when").

The lab's services are `deploy/compose.yaml`'s own commands, run as processes here (no
Docker): Redis with the compose file's arguments (append-only, a password), a fresh
PostgreSQL database, the `migrate` step once, then the API and the reconciler. One lab-host
agent runs the systemd unit's `ExecStart` with `devicefarm-agent.env.example`'s settings
filled in: the host CPU (real runs, so a slower model shows) and a no-op device whose
failure the lab later "fixes" (a restart with new settings, as an operator would).

The CI job is docs/ci.md's GitHub Actions step, run as GitHub runs it (`bash -e -o
pipefail`, the step's `env`), pointed at this lab through the API with a submit-role token.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require, require_module
from tests.integration.conftest import FAST_TIMING, new_pg_database
from tests.support.farm import free_port, kill_group, wait_until

yaml = require_module("yaml", "PyYAML")
require_module("uvicorn", "uvicorn (the api extra)")

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CI_STEP = "Benchmark on the device farm"  #: the step of docs/ci.md's workflow
STEP_TIMEOUT_S = 300
READY_S = 60.0
SECRET_PATTERN = re.compile(r"\$\{(\w+)(?::[?-][^}]*)?\}")  #: compose's ${VAR:?message}


def devicefarm(*args: str) -> list[str]:
    """The installed `devicefarm`, or this checkout's module where none is on PATH."""
    exe = shutil.which("devicefarm")
    return [exe, *args] if exe else [sys.executable, "-m", "devicefarm.cli", *args]


def compose_services() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]


def fill(value: str, secrets: dict[str, str]) -> str:
    """Compose's variable substitution, strict as compose is: an unset variable fails."""
    return SECRET_PATTERN.sub(lambda m: secrets[m.group(1)], value)


def agent_command(settings: dict[str, str]) -> list[str]:
    """The unit's ExecStart, with `$VAR` split into words as systemd does (unbraced)."""
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read(DEPLOY / "systemd" / "devicefarm-agent.service")
    words = unit["Service"]["ExecStart"].split()
    assert words[0] == "/opt/devicefarm/venv/bin/devicefarm", words
    out = devicefarm()
    for word in words[1:]:
        out += settings[word[1:]].split() if word.startswith("$") else [word]
    return out


def agent_settings(**values: str) -> dict[str, str]:
    """devicefarm-agent.env.example, every key it names set to `values`'."""
    example = DEPLOY / "systemd" / "devicefarm-agent.env.example"
    keys = [
        line.split("=", 1)[0]
        for line in example.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert sorted(keys) == sorted(values), "the example's settings changed: follow them here"
    return values


@dataclass
class Lab:
    folder: Path
    env: dict[str, str]  #: what compose gives every farm service (database, broker, tokens)
    api_url: str
    tokens: dict[str, str]  #: role -> token
    cpu_key: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Path:
        log = self.folder / f"{name}.log"
        self.procs[name] = subprocess.Popen(
            argv,
            cwd=self.folder,
            env=env or self.env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return log

    def alive(self, name: str) -> None:
        if self.procs[name].poll() is not None:
            log = (self.folder / f"{name}.log").read_text()[-3000:]
            pytest.fail(f"the lab's {name} exited:\n{log}")

    def start_agent(self, devices: str) -> None:
        """The agent as systemd starts it, on this host's CPU and `devices`."""
        home = self.folder / "agent-home"
        settings = agent_settings(
            DEVICEFARM_DB=self.env["DEVICEFARM_DB"],
            DEVICEFARM_BROKER=self.env["DEVICEFARM_BROKER"],
            DEVICEFARM_AGENT_ARGS=f"--devices cpu,{devices} --tags lab1",
            DEVICEFARM_ANDROID_TOOLS=str(self.folder / "android-tools"),
        )
        env = dict(os.environ) | FAST_TIMING | settings
        env |= {"DEVICEFARM_HOME": str(home), "HOME": str(home)}  # the unit's Environment=
        log = self.start("agent", agent_command(settings), env)
        serving = f"serving {self.cpu_key}, {devices.split('?')[0]}\n"

        def ready() -> bool:  # its queues exist from here: a job sent now waits in Redis
            self.alive("agent")
            return serving in log.read_text()

        wait_until(ready, READY_S, "the lab agent to serve its devices")

    def stop_agent(self) -> None:
        """`systemctl stop`: SIGTERM to the agent (KillMode=mixed), the rest after a grace."""
        proc = self.procs.pop("agent")
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        finally:
            kill_group(proc)

    def ci_step(
        self, workdir: Path, model: Path, name: str, devices: str
    ) -> subprocess.CompletedProcess:
        """docs/ci.md's workflow step, as GitHub runs it, pointed at this lab."""
        step = ci_workflow_step()
        env = dict(step["env"])
        assert set(env) == {
            "DEVICEFARM_API", "DEVICEFARM_API_TOKEN", "MODEL", "MODEL_NAME",
            "FARM_DEVICES", "FARM_CONFIGS",
        }, "the documented step's settings changed: follow them here"  # fmt: skip
        env.update(
            DEVICEFARM_API=self.api_url,
            DEVICEFARM_API_TOKEN=self.tokens["submit"],
            MODEL=str(model),
            MODEL_NAME=name,
            FARM_DEVICES=devices,
            FARM_CONFIGS="cpu",
        )
        runner = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEFARM_")}
        path = os.pathsep.join([str(Path(devicefarm()[0]).parent), runner.get("PATH", "")])
        script = step["run"]
        if not shutil.which("devicefarm"):  # a checkout without the console script
            script = script.replace("devicefarm ", f"{shlex.join(devicefarm())} ", 1)
        workdir.mkdir(parents=True, exist_ok=True)
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=workdir,
            env=runner | env | {"PATH": path, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT_S,
        )

    def cli(self, *args: str, role: str = "read") -> subprocess.CompletedProcess:
        """A user's `devicefarm` through the API."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEFARM_")}
        env |= {"DEVICEFARM_API": self.api_url, "DEVICEFARM_API_TOKEN": self.tokens[role]}
        return subprocess.run(
            devicefarm(*args),
            env=env | {"PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def rows(self, campaign: int) -> list[dict[str, Any]]:
        done = self.cli("results", str(campaign), "--format", "json")
        return json.loads(done.stdout)


def ci_workflow_step() -> dict[str, Any]:
    text = (REPO / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    workflows = [yaml.safe_load(b) for b in blocks if CI_STEP in b]
    assert len(workflows) == 1, f"docs/ci.md shows no single workflow with {CI_STEP!r}"
    steps = workflows[0]["jobs"]["farm"]["steps"]
    [step] = [s for s in steps if s.get("name") == CI_STEP]
    return step


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    require(shutil.which("redis-server") is not None, "redis-server")
    from worker_agent.devices import host_name

    folder = tmp_path_factory.mktemp("lab")
    secrets = {"POSTGRES_PASSWORD": uuid.uuid4().hex, "REDIS_PASSWORD": uuid.uuid4().hex}
    services = compose_services()
    redis_port = free_port()
    with new_pg_database("devicefarm_lab") as db_url:
        env_keys = services["api"]["environment"]
        tokens_file = folder / "tokens.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEFARM_")}
        env |= FAST_TIMING | {"PYTHONPATH": str(REPO), "DEVICEFARM_HOME": str(folder)}
        env |= {
            "DEVICEFARM_DB": db_url,  # compose's host `postgres` is the test server
            "DEVICEFARM_BROKER": (f"redis://:{secrets['REDIS_PASSWORD']}@127.0.0.1:{redis_port}/0"),
            "DEVICEFARM_TOKENS": str(tokens_file),
        }
        assert set(env_keys) == {"DEVICEFARM_DB", "DEVICEFARM_BROKER", "DEVICEFARM_TOKENS"}
        lab = Lab(folder, env, "", {}, f"cpu:reference:{host_name()}")
        try:
            redis = [fill(w, secrets) for w in services["redis"]["command"]]
            redis += ["--port", str(redis_port), "--bind", "127.0.0.1", "--dir", str(folder)]
            lab.start("redis", redis)
            for role in ("admin", "submit", "read"):  # docs/deploy.md's token step
                made = subprocess.run(
                    devicefarm("api", "token", "add", f"{role}-user", "--role", role),
                    env=env, capture_output=True, text=True, check=False,
                )  # fmt: skip
                assert made.returncode == 0, made.stderr
                lab.tokens[role] = made.stdout.strip()
            migrate = subprocess.run(
                devicefarm(*services["migrate"]["command"][1:]),
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert migrate.returncode == 0, migrate.stdout + migrate.stderr
            api_port = free_port()
            api = devicefarm(*services["api"]["command"][1:])
            lab.start("api", [*api, "--host", "127.0.0.1", "--port", str(api_port)])
            lab.start("reconciler", devicefarm(*services["reconciler"]["command"][1:]))
            lab.api_url = f"http://127.0.0.1:{api_port}"

            def api_up() -> bool:
                lab.alive("api")
                lab.alive("reconciler")
                return lab.cli("devices").returncode == 0

            wait_until(api_up, READY_S, "the lab's API", 0.5)
            yield lab
        finally:
            for proc in lab.procs.values():
                kill_group(proc)


def junit(path: Path) -> list[tuple[str, str | None]]:
    """(testcase name, failure type or None) for each job in a JUnit file."""
    suite = ET.parse(path).getroot().find("testsuite")
    out = []
    for case in suite.iter("testcase"):
        failure = case.find("failure")
        out.append((case.get("name"), None if failure is None else failure.get("type")))
    return sorted(out, key=lambda c: c[0])


def example_model(path: Path, size: int) -> Path:
    made = subprocess.run(
        devicefarm("example", str(path), "--size", str(size)),
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return path


def campaign_of(output: str) -> int:
    return int(re.search(r"campaign (\d+): \d+ jobs on", output)[1])


def test_a_clean_run_passes_and_a_slowed_model_of_its_name_regresses(lab: Lab, tmp_path) -> None:
    lab.start_agent("noop:spare")
    try:
        fast = example_model(tmp_path / "net.tflite", 64)
        slow = example_model(tmp_path / "net_slow.tflite", 160)  # ~6x the work, same name
        cpu = f"key={lab.cpu_key}"

        clean = lab.ci_step(tmp_path / "ci1", fast, "net", cpu)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert f"[1/1] {lab.cpu_key} cpu: succeeded" in clean.stdout
        assert re.search(r"campaign \d+: passed \(exit 0\)", clean.stdout), clean.stdout
        assert junit(tmp_path / "ci1" / "farm-junit.xml") == [(f"{lab.cpu_key} cpu", None)]

        slowed = lab.ci_step(tmp_path / "ci2", slow, "net", cpu)
        assert slowed.returncode == 3, slowed.stdout + slowed.stderr
        assert f"suspect: net {lab.cpu_key} cpu: fastest run" in slowed.stdout
        assert f"net {lab.cpu_key} cpu: regressed, confirmed" in slowed.stdout
        assert "(the median of 1 run(s); noise ±10.0%, a prior" in slowed.stdout
        report = tmp_path / "ci2" / "farm-junit.xml"
        assert junit(report) == [(f"{lab.cpu_key} cpu", "regression")]
        # the confirmation ran through the API: 3 pairs of the first version and this one,
        # taking turns first
        found = re.search(r"confirmation campaign (\d+): 3 pairs of version (\w+)", slowed.stdout)
        pairs = lab.rows(int(found[1]))
        first = lab.rows(campaign_of(clean.stdout))[0]["sha256"]
        now = lab.rows(campaign_of(slowed.stdout))[0]["sha256"]
        assert first.startswith(found[2]) and first != now
        assert [r["sha256"] for r in sorted(pairs, key=lambda r: r["job"])] == [
            first,
            now,
            now,
            first,
            first,
            now,
        ]
        assert {(r["state"], r["device"], r["model"]) for r in pairs} == {
            ("succeeded", lab.cpu_key, "net")
        }
    finally:
        lab.stop_agent()


def test_a_failed_device_fails_the_build_and_a_rerun_retries_exactly_it(lab: Lab, tmp_path) -> None:
    lab.start_agent("noop:phone1?error=model")
    model = example_model(tmp_path / "seg.tflite", 32)
    try:
        broken = lab.ci_step(tmp_path / "ci", model, "seg", "tag=lab1")
    finally:
        lab.stop_agent()
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "failed jobs (1):" in broken.stdout and "noop:phone1 cpu: failed" in broken.stdout
    assert junit(tmp_path / "ci" / "farm-junit.xml") == [
        (f"{lab.cpu_key} cpu", None),
        ("noop:phone1 cpu", "failed"),
    ]
    campaign = campaign_of(broken.stdout)
    before = {r["job"]: r for r in lab.rows(campaign)}
    assert lab.cli("status", str(campaign)).returncode == 1

    lab.start_agent("noop:phone1")  # the phone is fixed: same key, no error
    try:
        refused = lab.cli("rerun", str(campaign))  # a read token may not
        assert refused.returncode == 1 and "HTTP 403" in refused.stderr
        rerun = lab.cli("rerun", str(campaign), role="submit")
        assert rerun.returncode == 0, rerun.stderr
        [failed] = [j for j, r in before.items() if r["state"] == "failed"]
        assert f"re-queued job {failed}: seg noop:phone1 cpu (was failed)" in rerun.stdout
        assert "1 job(s) re-queued" in rerun.stdout

        def settled() -> dict[int, dict[str, Any]] | None:
            rows = {r["job"]: r for r in lab.rows(campaign)}
            return rows if rows[failed]["state"] == "succeeded" else None

        after = wait_until(settled, 60, "the re-run job", 0.5)
    finally:
        lab.stop_agent()
    assert set(after) == set(before)  # the same jobs, no new campaign
    for job, row in before.items():
        again = after[job]
        assert again["device"] == row["device"]
        if job == failed:
            assert (again["state"], again["attempt"]) == ("succeeded", row["attempt"] + 1)
        else:
            assert (again["state"], again["attempt"]) == (row["state"], row["attempt"])
    assert lab.cli("status", str(campaign)).returncode == 0
    assert "nothing to re-run" in lab.cli("rerun", str(campaign), role="submit").stdout
