"""Every subcommand `devicefarm --help` lists, run as a real process with a bad value of one
of its arguments: one row per (subcommand, argument, bad value). Each row checks the exit
code (2 for a usage error, as argparse; 1 for what the farm refuses, an unreachable service
among them), one error line on stderr naming the argument (argparse's usage lines may come
before it), no traceback, and no side effect: no file or folder made, no database row
written. Every refusal comes before any work, so no row starts discovery or a canary and
each takes about a second.

Beside the hand-written rows, every argument with a type or choices that they do not name
gets a generated row (generated_rows: a nonsense value, refused by name).

Cases the older tables already hold (numbers, unknown URL schemes, missing models, output
paths of the runtime tools: test_farm_cli_errors.py, test_cli_errors.py) are not repeated.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from delegate_runtime.examples import scaled_model
from tests.support.farm import free_port

REPO = Path(__file__).resolve().parents[2]
#: A row that takes longer has done work it should have refused (or is waiting on a network).
ROW_TIMEOUT_S = 30
#: SQLite's own files beside an open database: not a side effect.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
NO_FARM = "(`devicefarm run` or `devicefarm db upgrade --db URL` creates one)"


class Row(NamedTuple):
    argv: str  #: {tmp} is the work folder (also the cwd), {port} a port nothing listens on
    code: int
    says: tuple[str, ...]  #: fragments of the error line
    farm: bool = False  #: run beside an existing (empty, migrated) farm in $DEVICEFARM_HOME
    env: tuple[tuple[str, str], ...] = ()


def row(argv: str, code: int, *says: str, **kw) -> pytest.param:
    r = Row(argv, code, says, **kw)
    env = " ".join(f"${k}={v}" for k, v in r.env)
    return pytest.param(r, id=f"{env} {argv}".strip().replace("{tmp}/", ""))


ROWS = [
    # runtime tools
    row("invoke m.tflite --inputs {tmp}/no.npz --outputs o.npz", 2, "argument --inputs: ", "no.npz does not exist"),
    row("invoke m.tflite --inputs m.tflite --outputs o.npz --delegate tpu", 2, "argument --delegate: invalid choice: 'tpu'"),
    row("invoke m.tflite --inputs m.tflite --outputs o.npz --precision fp8", 2, "argument --precision: invalid choice"),
    row("inspect --tensors", 2, "the following arguments are required: model"),
    row("ops --gpu=yes", 2, "argument --gpu: ignored explicit argument 'yes'"),
    row("example {tmp}/no/x.tflite", 2, "argument out: ", "folder", "no does not exist"),
    row("example x.tflite --classes 1", 2, "argument --classes: must be at least 2, got 1"),
    row("build-pool --builders 0", 2, "argument --builders: must be at least 1, got 0"),
    row("build-pool --device 9:9", 1, "no OpenCL device 9:9"),
    row("build-pool --idle-release -1", 2, "argument --idle-release: must be at least 0, got -1"),
    row("benchmark --graph m.tflite --use_gpu maybe", 2, "argument --use_gpu: expected true or false"),
    row("diff --model m.tflite --num_runs 0", 2, "argument --num_runs: must be at least 1, got 0"),
    row("benchmark --graph m.tflite --num-runs 3", 2, "devicefarm benchmark: error: unrecognized arguments", "--num-runs: did you mean --num_runs?"),
    row("run m.tflite --num_runs 3", 2, "devicefarm run: error: unrecognized arguments", "--num_runs: did you mean --runs?"),
    row("accuracy classification --model m.tflite --images {tmp}/no --ground_truth_labels notes.txt --model_output_labels notes.txt", 2, "argument --images: ", "no does not exist"),
    row("accuracy detection --model m.tflite --annotations {tmp}/no.json", 2, "argument --annotations: ", "no.json does not exist"),
    row("make-dataset classification --out {tmp}/no/a/b", 2, "argument --out: cannot create", "no/a does not exist"),
    row("make-dataset classification --out notes.txt", 2, "argument --out: notes.txt is a file, not a directory"),
    row("make-dataset classification --out ds --num_classes 99", 2, "argument --num_classes: must be from 2 to 12, got 99"),
    row("make-dataset classification --out ds --noise -1", 2, "argument --noise: must not be negative"),
    row("make-dataset detection --out ds --width 8", 2, "argument --width: must be at least 16, got 8"),
    # the embedded run: refused before any device is looked for
    row("run m.tflite --configs gpu16", 2, "argument --configs: unknown configuration 'gpu16'"),
    row("run m.tflite --configs cpu,cpu", 2, "argument --configs: configuration 'cpu' is given twice"),
    row("run m.tflite --devices driver>>1", 2, "argument --devices: 'driver>>1' is not a device spec"),
    row("run m.tflite --devices gpu", 2, "argument --devices: unknown device kind 'gpu'"),
    row("run m.tflite --devices noop:a?colour=red", 2, "argument --devices: ", "unknown option(s) colour"),
    row("run m.tflite --broker amqp://x", 2, "argument --broker: ", "no transport for 'amqp'"),
    row("run m.tflite --broker filesystem://{tmp}/no/broker", 2, "argument --broker: ", "no does not exist"),
    row("run m.tflite --db sqlite:///{tmp}/no/farm.db", 2, "argument --db: cannot create", "no does not exist"),
    row("run m.tflite --input garbage", 1, "--input 'garbage': give LAYER:SHAPE:FILE"),
    # commands that read a farm: it must exist, never made by a typo
    row("status", 2, "no farm in ", "/home (the farm's home", "or give --db"),
    row("status --home {tmp}/no", 2, "no farm in ", "/no (the farm's home", "or give --db"),
    row("run m.tflite --home notes.txt", 2, "argument --home: ", "notes.txt is not a folder"),
    row("--home notes.txt results 1", 2, "argument --home: ", "notes.txt is not a folder"),
    row("status --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db", NO_FARM),
    row("status --db sqlite:///notes.txt", 2, "argument --db: notes.txt is not a SQLite database"),
    row("results 1 --db sqlite:///{tmp}", 2, "argument --db: ", "is a directory, not a SQLite database file"),
    row("results 1 --format xml", 2, "argument --format: invalid choice: 'xml'"),
    row("devices", 2, "$DEVICEFARM_DB: no farm database typo.db", env=(("DEVICEFARM_DB", "sqlite:///typo.db"),)),
    row("cancel 1 --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("rerun 1 --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("rerun 1 --broker amqp://x", 2, "argument --broker: ", "no transport for 'amqp'", farm=True),
    row("submit m.tflite --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("submit m.tflite --configs gpu16", 2, "argument --configs: unknown configuration 'gpu16'", farm=True),
    row("submit m.tflite --devices driver>>1", 2, "argument --devices: bad selector term 'driver>>1'", farm=True),
    row("submit m.tflite --wait --junit {tmp}/no/j.xml", 2, "argument --junit: ", "no does not exist", farm=True),
    row("allowlist --model m.tflite --out {tmp}/no/x.json", 2, "argument --out: cannot write", "no does not exist", farm=True),
    row("allowlist --model m.tflite --out {tmp}", 2, "argument --out: ", "is a directory; give a file path", farm=True),
    row("allowlist --model m.tflite --out - --format devicedb-bin", 2, "argument --out: devicedb-bin is binary", farm=True),
    row("allowlist --model m.tflite", 2, "exporting a list needs --out", farm=True),
    row("allowlist --model m.tflite --out x.json --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("allowlist evaluate {tmp}/no.bin --facts a=b", 2, "argument LIST: ", "no.bin does not exist"),
    row("allowlist merge notes.txt --base {tmp}/no.bin --out x.bin", 2, "argument --base: ", "no.bin does not exist"),
    row("allowlist merge notes.txt --base notes.txt --out {tmp}/no/x.bin", 2, "argument --out: cannot write", "no does not exist"),
    row("dashboard --db sqlite:///typo.db --port {port}", 2, "argument --db: no farm database typo.db"),
    row("db current --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("db upgrade --db sqlite:///{tmp}/no/farm.db", 2, "argument --db: cannot create", "no does not exist"),
    row("db downgrade", 2, "argument action: invalid choice: 'downgrade'"),
    row("api --db sqlite:///typo.db --port {port}", 2, "argument --db: no farm database typo.db"),
    row("api --tokens {tmp}/no/t.json --port {port}", 2, "argument --tokens: folder", "no does not exist"),
    row("api token add bob --role read --tokens {tmp}/no/t.json", 2, "argument --tokens: folder", "no does not exist"),
    row("api token add bob --role god", 2, "argument --role: invalid choice: 'god'"),
    # servers: a typo'd broker is refused at once, an unreachable one reached once (exit 1)
    row("worker --broker notaurl --db sqlite:///x.db", 2, "argument --broker: bad broker URL 'notaurl'", "expected SCHEME://"),
    row("worker --broker redis://127.0.0.1:{port}/0", 1, "cannot reach the broker redis://127.0.0.1:", "Connection refused", farm=True),
    row("worker", 2, "$DEVICEFARM_BROKER: bad broker URL 'amqp://x'", farm=True, env=(("DEVICEFARM_BROKER", "amqp://x"),)),
    row("worker --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("worker --devices driver>>1", 2, "argument --devices: 'driver>>1' is not a device spec", farm=True),
    row("worker --devices noop:", 2, "argument --devices: no-op device spec 'noop:' needs a name", farm=True),
    row("reconcile --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("reconcile --broker redis://127.0.0.1:{port}/0", 1, "cannot reach the broker redis://127.0.0.1:", farm=True),
    # a lab admin's projects, a user's reservations
    row("projects add vision --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("projects add vision --max-concurrent-jobs -1", 2, "argument --max-concurrent-jobs: must be 0 or more, not -1"),
    row("projects set vision --device-minutes-per-day lots", 2, "argument --device-minutes-per-day: not a number: 'lots'"),
    row("projects set vision --max-concurrent-jobs 2", 1, "no project vision (`devicefarm projects add` creates it)", farm=True),
    row("reserve noop:a --for soon", 2, "argument --for: not a duration like 2h, 90m or 1h30m: 'soon'"),
    row("reserve noop:a --until tomorrow", 2, "argument --until: not a time like '2025-06-01 14:00' (UTC)"),
    row("reserve noop:a --for 2h --db sqlite:///typo.db", 2, "argument --db: no farm database typo.db"),
    row("reserve noop:zz --for 2h", 1, "no device noop:zz (devices: none registered)", farm=True),
    row("reservations cancel 0", 2, "argument id: must be 1 or more, not 0"),
    row("reservations cancel 7", 1, "no reservation 7 (`devicefarm reservations list`)", farm=True),
    row("adb-sim --profile nope", 1, "profile 'nope' is neither a file nor a built-in"),
    row("adb-sim --port 70000", 2, "argument --port: must be from 0 to 65535, got 70000"),
]  # fmt: skip


@pytest.fixture(scope="module")
def empty_farm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated farm database with nothing in it, copied into each row that needs one."""
    from farm_core.database import open_database

    path = tmp_path_factory.mktemp("farm") / "farm.db"
    open_database(f"sqlite:///{path}").dispose()
    return path


def devicefarm(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`devicefarm ARGV` as a user runs it, in its own session: stopped with everything it
    started when it outlives ROW_TIMEOUT_S (work it should have refused)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "devicefarm.cli", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=ROW_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n(still running after {ROW_TIMEOUT_S} s: killed)"
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever it left running
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def files(folder: Path) -> set[str]:
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if not p.name.endswith(SQLITE_SIDE_FILES)
    }


def rows_per_table(db: Path) -> dict[str, int]:
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}


def assert_one_error_line(r: subprocess.CompletedProcess, row: Row) -> None:
    assert r.returncode == row.code, r.stdout + r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    *before, last = r.stderr.strip().splitlines() or [""]
    assert last.startswith("devicefarm "), r.stderr
    # nothing but argparse's usage (and its wrapped lines) before the error
    assert all(line.startswith(("usage: ", " ")) for line in before), r.stderr
    for fragment in row.says:
        assert fragment in last, last


def _named(rows: list) -> set[tuple[str, str]]:
    """(subcommand, argument) pairs whose refusal the rows check by name."""
    from devicefarm.cli import subcommand_of

    out = set()
    for param in rows:
        r = param.values[0]
        sub = subcommand_of(shlex.split(r.argv))
        out |= {(sub, m) for s in r.says for m in re.findall(r"argument (--?[\w-]+|\w+)", s)}
    return out


#: A value no checked argument takes: text where a number, a choice, a boolean or a URL is
#: wanted; for a file, one in a folder that does not exist; for a folder, a file.
NONSENSE, NO_PATH, NOT_A_FOLDER = "nonsense", "{tmp}/no/such", "notes.txt"


def generated_rows() -> list:
    """A row for every argument with a type or choices that ROWS does not name: its
    nonsense value is refused by name, before any work (positionals follow the options)."""
    from devicefarm.cli import COMMANDS, build_parser

    named, out = _named(ROWS), []
    for name in COMMANDS:
        sub = build_parser([name])._defaults["_parser"]
        for action in sub._actions:
            if action.type is None and action.choices is None or action.help == "==SUPPRESS==":
                continue
            # argparse names a positional by its metavar, as usage shows it
            flag = action.option_strings[0] if action.option_strings else action.metavar
            flag = flag or action.dest
            if (name, flag) in named:
                continue
            kind = getattr(action.type, "__name__", "")
            value = NOT_A_FOLDER if "folder" in kind else NO_PATH if "file" in kind else NONSENSE
            argv = f"{name} {flag} {value}" if action.option_strings else f"{name} {value}"
            out.append(row(argv, 2, f"argument {flag}"))
    return out


GENERATED = generated_rows()


@pytest.mark.parametrize("row", ROWS + GENERATED)
def test_a_bad_argument_is_refused_before_any_work(row: Row, tmp_path: Path, empty_farm: Path):
    (tmp_path / "m.tflite").write_bytes(scaled_model(2.0))
    (tmp_path / "notes.txt").write_text("not a model, a list or a database\n")
    home = tmp_path / "home"
    if row.farm:
        home.mkdir()
        shutil.copy(empty_farm, home / "farm.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEFARM_")}
    env |= {"DEVICEFARM_HOME": str(home), "PYTHONPATH": str(REPO), **dict(row.env)}
    argv = shlex.split(row.argv.format(tmp=tmp_path, port=free_port()))
    before, farm_rows = files(tmp_path), rows_per_table(home / "farm.db")

    r = devicefarm(argv, tmp_path, env)

    assert_one_error_line(r, row)
    assert files(tmp_path) == before, "a file or folder was made"
    assert rows_per_table(home / "farm.db") == farm_rows, "the farm was written"


def test_every_subcommand_has_rows():
    from devicefarm.cli import COMMANDS, subcommand_of

    covered = {subcommand_of(shlex.split(p.values[0].argv)) for p in ROWS}
    assert covered == set(COMMANDS)


# -- the selector's parse error through submit (the exit code waits on submit.py: above) --


def test_submit_names_a_malformed_selector_term(tmp_path: Path, empty_farm: Path):
    """`driver>>1` is a term that parses as nothing: named as such, not reported as a
    selector that matches no device."""
    (tmp_path / "m.tflite").write_bytes(scaled_model(2.0))
    (tmp_path / "home").mkdir()
    shutil.copy(empty_farm, tmp_path / "home" / "farm.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEFARM_")}
    env |= {"DEVICEFARM_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    r = devicefarm(["submit", "m.tflite", "--devices", "driver>>1"], tmp_path, env)
    assert r.returncode in (1, 2), r.stderr
    assert "bad selector term 'driver>>1'" in r.stderr, r.stderr
    assert "matches no device" not in r.stderr
    assert rows_per_table(tmp_path / "home" / "farm.db")["campaigns"] == 0
