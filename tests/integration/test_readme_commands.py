"""Every `devicefarm ...` command line README.md shows runs as written (issue 15).

The lines are read from README.md's code blocks, so a new or changed example is tested
without editing this file. Each becomes its own case: `a | b` between two commands and
`a && b` are separate lines; a line runs without its optional `[...]` parts, and once with
each of them (but those that end in `...`); a word with plain alternatives (`cpu|gpu`)
gives one case per alternative; the README's placeholders are filled in (PLACEHOLDERS)
and its `...` completed as docs/tools.md does (COMPLETIONS). Commands that serve (worker,
dashboard, adb-sim) must come up and keep running. The farm is the embedded one under a
temporary DEVICEFARM_HOME; URLs of Redis and PostgreSQL (the worker's, `db upgrade`'s)
are real servers. The README's Python example runs too.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require
from tests.support.farm import free_port, kill_group, wait_until

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLE = "example.tflite"
#: README placeholder -> its value in the test farm ({dir}: the farm's work directory).
PLACEHOLDERS = {
    "MODEL": EXAMPLE,
    "M": EXAMPLE,
    "CAMPAIGN": "1",
    "IN.npz": "in.npz",
    "OUT.npz": "out.npz",
    "HOST": "127.0.0.1",
    "N": "3",
    "SPEC": "0:0",
}
#: What the README's `...` stands for, per command (as docs/tools.md gives them).
COMPLETIONS = {
    "accuracy classification": "--model cls/classifier.tflite --images cls/images "
    "--ground_truth_labels cls/ground_truth_labels.txt "
    "--model_output_labels cls/model_output_labels.txt",
    "accuracy detection": "--model det/detector.tflite --annotations det/annotations.json "
    "--images det/images",
    "make-dataset": "classification --out new_dataset",
}
#: Commands that serve until stopped.
SERVERS = ("worker", "dashboard", "adb-sim", "build-pool")
READY_S = 60.0
_ALTERNATIVES = re.compile(r"^[a-z0-9-]+(\|[a-z0-9-]+)+$")
#: An optional part with no optional part inside.
_OPTIONAL = re.compile(r"\s*\[([^\[\]]*)\]")


#: README sections whose lines a test of their own runs together, as a scenario.
OWN_TESTS = {"## A lab on three hosts": "tests/e2e/test_lab_three_hosts.py"}


def readme_lines(text: str) -> list[str]:
    """Each `devicefarm` command in the README's code blocks, comments dropped (but for the
    sections in OWN_TESTS)."""
    out, in_block, skipping = [], False, False
    for line in text.splitlines():
        if line.startswith("## "):
            skipping = line.strip() in OWN_TESTS
        if skipping:
            continue
        if line.strip().startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        line = line.split("  #", 1)[0].strip()
        for part in re.split(r"\s+&&\s+|\s+\|\s+(?=devicefarm\b)", line):
            if part.strip().startswith("devicefarm "):
                out.append(part.strip())
    return out


def _without_optional(line: str) -> str:
    while True:
        shorter = _OPTIONAL.sub("", line)
        if shorter == line:
            return line
        line = shorter


def variants(line: str) -> list[str]:
    """The line without its optional parts, then with each one (bar those ending `...`)."""
    out = [_without_optional(line)]
    for m in _OPTIONAL.finditer(line):
        if not m.group(1).rstrip().endswith("..."):
            kept = line[: m.start()] + " " + m.group(1) + line[m.end() :]
            out.append(_without_optional(kept))
    return out


def expand(line: str) -> list[list[str]]:
    """The argv of each case a README line stands for."""
    return [argv for variant in variants(line) for argv in _expand_words(variant)]


def _expand_words(line: str) -> list[list[str]]:
    words = shlex.split(line)[1:]
    ellipsis = words[-1:] == ["..."]
    words = [w for w in words if w != "..."]
    cases: list[list[str]] = [[]]
    for w in words:
        options = w.split("|") if _ALTERNATIVES.match(w) else [w]
        cases = [[*c, PLACEHOLDERS.get(o, o)] for c in cases for o in options]
    if ellipsis:
        for c in cases:  # where the command needs more than the line gives
            key = next((k for k in COMPLETIONS if " ".join(c).startswith(k)), None)
            c += shlex.split(COMPLETIONS[key]) if key else []
    return cases


CASES = [
    pytest.param(argv, id=" ".join(argv)[:160])
    for line in readme_lines(README.read_text())
    for argv in expand(line)
]


def test_the_readme_shows_the_farm_commands() -> None:
    commands = {argv[0] for argv in (c.values[0] for c in CASES)}
    assert {"run", "submit", "status", "results", "allowlist", "worker", "db"} <= commands


def test_optional_parts_are_cases_of_their_own() -> None:
    line = "devicefarm invoke MODEL --delegate cpu|gpu [--precision fp32|fp16] [--device SPEC]"
    assert [" ".join(argv) for argv in expand(line)] == [
        "invoke example.tflite --delegate cpu",
        "invoke example.tflite --delegate gpu",
        "invoke example.tflite --delegate cpu --precision fp32",
        "invoke example.tflite --delegate cpu --precision fp16",
        "invoke example.tflite --delegate gpu --precision fp32",
        "invoke example.tflite --delegate gpu --precision fp16",
        "invoke example.tflite --delegate cpu --device 0:0",
        "invoke example.tflite --delegate gpu --device 0:0",
    ]
    assert expand("devicefarm worker --db X [--devices ...]") == [["worker", "--db", "X"]]


def test_the_main_jobs_model_is_ignored_by_git() -> None:
    """The README's main job writes example.tflite into the checkout: git ignores it."""
    require(shutil.which("git") is not None, "git")
    done = subprocess.run(
        ["git", "check-ignore", "-q", EXAMPLE], cwd=ROOT, capture_output=True, check=False
    )
    require(done.returncode != 128, f"a git checkout at {ROOT}")
    assert done.returncode == 0, f"{EXAMPLE} is not in .gitignore"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A farm with the example model measured (as `devicefarm run` leaves it), inputs for
    invoke, the datasets the accuracy examples read and an API token."""
    from devicefarm.cli import main

    folder = tmp_path_factory.mktemp("readme")
    saved = {k: os.environ.get(k) for k in ("DEVICEFARM_HOME", "DEVICEFARM_OFFLINE_AFTER_S")}
    old_cwd = Path.cwd()
    os.chdir(folder)
    os.environ["DEVICEFARM_HOME"] = str(folder / ".devicefarm")
    os.environ["DEVICEFARM_OFFLINE_AFTER_S"] = "3600"  # the run's devices stay selectable
    try:
        assert main(["example", EXAMPLE]) == 0
        assert main(["run", EXAMPLE, "--runs", "3", "--diff-runs", "2"]) == 0
        from delegate_runtime import read_model

        model = read_model((folder / EXAMPLE).read_bytes())
        sg = model.subgraphs[0]
        shape = [int(d) for d in sg.tensors[sg.inputs[0]].shape]
        np.savez(folder / "in.npz", in_0=np.ones(shape, np.float32))
        assert main(["make-dataset", "classification", "--out", "cls"]) == 0
        assert main(["make-dataset", "detection", "--out", "det"]) == 0
        # a token, as the README's `api token add` lines leave one: the cases run spread
        # over the test workers, each with a farm of its own, and `api token list` may
        # come to one whose farm never ran those lines
        assert main(["api", "token", "add", "readme-reader", "--role", "read"]) == 0
        yield folder
    finally:
        os.chdir(old_cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "devicefarm.cli", *argv]


def _env(folder: Path, **extra: str) -> dict[str, str]:
    return os.environ | {
        "DEVICEFARM_HOME": str(folder / ".devicefarm"),
        "DEVICEFARM_OFFLINE_AFTER_S": "3600",
        **extra,
    }


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _serve(argv: list[str], folder: Path, ready, env: dict[str, str]) -> None:
    proc = subprocess.Popen(
        _command(argv),
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until(lambda: ready() or proc.poll() is not None, READY_S, " ".join(argv))
        assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
    finally:
        kill_group(proc)
        proc.wait()


def _run_server(argv: list[str], folder: Path, request: pytest.FixtureRequest) -> None:
    if argv[0] == "adb-sim":
        port = free_port()
        argv = [str(port) if a == "5555" else a for a in argv]
        _serve(argv, folder, lambda: _port_open(port), _env(folder))
    elif argv[0] == "dashboard":
        require_module_present("streamlit")
        port = free_port()
        _serve([*argv, "--port", str(port)], folder, lambda: _port_open(port), _env(folder))
    elif argv[0] == "build-pool":  # up once a builder's heartbeat is fresh
        from delegate_runtime.gpu.opencl.build_pool import live_builders
        from worker_agent.discovery import discover_opencl

        require(bool(discover_opencl("test")), "an OpenCL device (PoCL)")
        pools = folder / "cache" / "devicefarm" / "kernels" / "build-pool"

        def builders_up() -> bool:
            return pools.is_dir() and any(live_builders(d) for d in pools.iterdir())

        _serve(argv, folder, builders_up, _env(folder, XDG_CACHE_HOME=str(folder / "cache")))
    else:  # the worker, on a real Redis and PostgreSQL
        pg_url = request.getfixturevalue("pg_url")
        argv = with_services(argv, request)
        from sqlalchemy import select

        from farm_core.database import open_database
        from farm_core.schema import Device

        engine = open_database(pg_url)

        def registered() -> bool:
            with engine.begin() as conn:
                return conn.execute(select(Device.key)).first() is not None

        _serve(argv, folder, registered, _env(folder))


#: README URL prefix -> the fixture giving that service's URL.
SERVICES = {"redis://": "redis_url", "postgresql://": "pg_url"}


def with_services(argv: list[str], request: pytest.FixtureRequest) -> list[str]:
    """`argv` with the README's Redis and PostgreSQL URLs replaced by real servers'."""
    out = []
    for a in argv:
        fixture = next((f for prefix, f in SERVICES.items() if a.startswith(prefix)), None)
        out.append(request.getfixturevalue(fixture) if fixture else a)
    return out


def require_module_present(name: str) -> None:
    import importlib.util

    require(importlib.util.find_spec(name) is not None, name)


@pytest.mark.parametrize("argv", CASES)
def test_readme_command_runs(argv: list[str], workdir: Path, request) -> None:
    if argv[0] in SERVERS:
        _run_server(argv, workdir, request)
        return
    if {"gpu", "--use_gpu", "--devices"} & set(argv):
        from worker_agent.discovery import discover_opencl

        require(bool(discover_opencl("test")), "an OpenCL device (PoCL)")
    argv = with_services(argv, request)
    done = subprocess.run(
        _command(argv), cwd=workdir, env=_env(workdir), capture_output=True, timeout=300
    )
    out = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 0, out
    if argv[0] == "submit":
        assert re.search(r"campaign \d+: [1-9]\d* jobs", out), out
        assert "no selected device runs it" not in out


def python_blocks(text: str) -> list[str]:
    """The README's ```python blocks, dedented."""
    return [
        textwrap.dedent(m.group(1)) for m in re.finditer(r"```python\n(.*?)\n\s*```", text, re.S)
    ]


def test_readme_python_example_runs(workdir: Path, tmp_path: Path) -> None:
    """The GpuSession example, on the example model and this machine's first OpenCL
    device (the README's "m.tflite" and "NVIDIA" stand for the reader's)."""
    from worker_agent.discovery import discover_opencl

    require(bool(discover_opencl("test")), "an OpenCL device (PoCL)")
    (block,) = python_blocks(README.read_text())
    code = block.replace('"m.tflite"', repr(str(workdir / EXAMPLE)))
    code = code.replace('device="NVIDIA"', "device=None")
    code = code.replace('"/var/cache/myapp/gpu"', repr(str(tmp_path / "gpu")))
    assert code.count(str(workdir)) == 1 and "device=None" in code, code
    space = {"x": np.ones((1, 96, 96, 3), np.float32)}
    exec(compile(code, "README.md", "exec"), space)  # noqa: S102 - the README's own code
    assert space["outputs"][0].shape == (1, 100)
    assert space["session"].delegation.to_dict()["fully_delegated"]
