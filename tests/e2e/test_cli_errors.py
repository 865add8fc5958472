"""The mistakes a newcomer makes with the runtime commands (inspect, invoke, benchmark,
diff, accuracy), each run as a subprocess: one clear error line, the usage exit code (2)
for a path that cannot be used, 1 for a bad file's contents, and never a traceback."""

from __future__ import annotations

import argparse
import importlib
import json
import re

import numpy as np
import pytest
from test_tools_cli import _gpu_available, devicefarm

from delegate_runtime.builder import ModelBuilder
from tests.conftest import require

#: Each runtime command with the flag that names its model ("" for a positional).
MODEL_FLAG = {"inspect": "", "invoke": "", "benchmark": "--graph", "diff": "--model"}
FAST = {
    "benchmark": ["--num_runs=1", "--min_secs=0", "--warmup_min_secs=0"],
    "diff": ["--num_runs=1"],
}


def _add_model() -> bytes:
    """y = a + b on (1, 4) floats, with tensor names holding terminal control bytes."""
    b = ModelBuilder()
    g = b.main
    a = g.input("a\x1b[2J\x07", (1, 4), np.float32)
    c = g.input("b\r\nfake line", (1, 4), np.float32)
    y = g.tensor("y\x1b[31mred", (1, 4), np.float32)
    g.op("ADD", [a, c], [y])
    g.output(y)
    return b.build()


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("errors") / "add.tflite"
    path.write_bytes(_add_model())
    return str(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("inputs") / "in.npz"
    np.savez(path, in_0=np.ones((1, 4), np.float32), in_1=np.full((1, 4), 2, np.float32))
    return str(path)


def command_line(command: str, model: str, inputs: str, *extra: str) -> list[str]:
    """`command` on `model`, with whatever else it needs to run."""
    flag = MODEL_FLAG[command]
    args = [command, *([flag, model] if flag else [model])]
    if command == "invoke":
        args += ["--inputs", inputs, "--outputs", extra[0] if extra else "/dev/null"]
        extra = extra[1:]
    return [*args, *FAST.get(command, []), *extra]


def assert_one_line_error(r, code: int, *fragments: str) -> str:
    """The command failed with `code`, its last stderr line holds every fragment, and
    nothing on stderr is a traceback. Returns that line."""
    assert r.returncode == code, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("devicefarm "), last
    for fragment in fragments:
        assert fragment in last, last
    return last


# -- paths that cannot be used: exit 2 before any work ------------------------------------


@pytest.mark.parametrize("command", list(MODEL_FLAG))
def test_a_directory_as_the_model(command, tmp_path, inputs):
    r = devicefarm(*command_line(command, str(tmp_path), inputs))
    assert_one_line_error(r, 2, "is a directory, not a file")


@pytest.mark.parametrize("command", list(MODEL_FLAG))
def test_a_missing_model(command, tmp_path, inputs):
    r = devicefarm(*command_line(command, str(tmp_path / "nope.tflite"), inputs))
    assert_one_line_error(r, 2, "nope.tflite does not exist")


@pytest.mark.parametrize(
    "command, flag",
    [
        ("invoke", "--outputs"),
        ("benchmark", "--json"),
        ("diff", "--json"),
    ],
)
@pytest.mark.parametrize("where", ["missing_folder", "a_folder"])
def test_output_path_checked_before_the_model_runs(command, flag, where, tmp_path, inputs):
    """The model is not even valid: the output path's error comes first, so it was
    checked before any work."""
    bad_model = tmp_path / "bad.tflite"
    bad_model.write_bytes(b"\x00" * 64)
    out = {"missing_folder": "/missing/dir/o.out", "a_folder": str(tmp_path)}[where]
    if command == "invoke":
        args = command_line(command, str(bad_model), inputs, out)
    else:
        args = command_line(command, str(bad_model), inputs, flag, out)
    r = devicefarm(*args)
    want = {
        "missing_folder": "folder /missing/dir does not exist",
        "a_folder": "is a directory; give a file path",
    }[where]
    assert_one_line_error(r, 2, f"argument {flag}: ", want)


def test_accuracy_detections_out_checked_before_the_model_runs(tmp_path):
    bad_model, annotations = tmp_path / "bad.tflite", tmp_path / "a.json"
    bad_model.write_bytes(b"\x00" * 64)
    annotations.write_text("{}")
    r = devicefarm(
        "accuracy",
        "detection",
        "--model",
        str(bad_model),
        "--annotations",
        str(annotations),
        "--detections_out",
        "/missing/dir/d.json",
    )
    assert_one_line_error(r, 2, "argument --detections_out: ", "folder /missing/dir does not exist")


@pytest.mark.parametrize("where", ["a_file", "under_a_file"])
def test_kernel_cache_folder_checked_before_the_model_runs(where, model, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    folder = {"a_file": a_file, "under_a_file": a_file / "cache"}[where]
    r = devicefarm(
        "benchmark", "--graph", model, "--use_gpu", "--delegate_serialize_dir", str(folder)
    )
    want = {"a_file": "is a file, not a directory", "under_a_file": "notes.txt is a file"}
    assert_one_line_error(r, 2, "argument --delegate_serialize_dir: ", want[where])


# -- bad contents: exit 1, a message that names the problem --------------------------------


@pytest.mark.parametrize("command", list(MODEL_FLAG))
@pytest.mark.parametrize("keep_bytes", [8, 100, 300])
def test_a_truncated_model_says_truncated(command, keep_bytes, model, inputs, tmp_path):
    cut = tmp_path / "cut.tflite"
    with open(model, "rb") as f:
        cut.write_bytes(f.read()[:keep_bytes])
    r = devicefarm(*command_line(command, str(cut), inputs))
    assert_one_line_error(r, 1, "ModelError: truncated", f"its {keep_bytes} bytes")


def test_invoke_reads_only_the_inputs_of_an_npz_with_expected_outputs(model, tmp_path):
    """Conformance files hold in_0.. and the expected out_0..: only in_* are inputs."""
    a, b = np.arange(4, dtype=np.float32)[None], np.full((1, 4), 0.5, np.float32)
    case = tmp_path / "case.npz"
    np.savez(case, in_0=a, in_1=b, out_0=a + b)
    out = tmp_path / "got.npz"
    r = devicefarm("invoke", model, "--inputs", str(case), "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    with np.load(out) as got:
        assert list(got.keys()) == ["out_0"]
        np.testing.assert_array_equal(got["out_0"], a + b)


def test_invoke_writes_the_outputs_path_as_given(model, inputs, tmp_path):
    out = tmp_path / "outputs.bin"  # numpy.savez on a name would append .npz
    r = devicefarm("invoke", model, "--inputs", inputs, "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    assert out.exists() and not (tmp_path / "outputs.bin.npz").exists()


@pytest.mark.parametrize(
    "content, message",
    [
        ("text", "is not an .npz file"),
        ("no_inputs", "hold no in_0, in_1, ... arrays (found x, out_0)"),
        ("gap", "must hold in_0..in_2; missing ['in_1']"),
    ],
)
def test_invoke_bad_inputs_file(content, message, model, tmp_path):
    path = tmp_path / "in.npz"
    one = np.ones((1, 4), np.float32)
    if content == "text":
        path.write_text("1 2 3 4\n")
    elif content == "no_inputs":
        np.savez(path, x=one, out_0=one)
    else:
        np.savez(path, in_0=one, in_2=one)
    r = devicefarm("invoke", model, "--inputs", str(path), "--outputs", str(tmp_path / "o.npz"))
    assert_one_line_error(r, 1, "JobError: ", message)
    assert not (tmp_path / "o.npz").exists()


def test_invoke_escapes_control_bytes_of_tensor_names_in_errors(model, tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, in_0=np.ones((1, 5), np.float32), in_1=np.ones((1, 4), np.float32))
    r = devicefarm("invoke", model, "--inputs", str(path), "--outputs", str(tmp_path / "o.npz"))
    assert_one_line_error(r, 1, "input 0 'a\\x1b[2J\\x07' must have shape [1, 4]")
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr


def test_inspect_escapes_control_bytes_of_tensor_names(model):
    r = devicefarm("inspect", "--tensors", model)
    assert r.returncode == 0, r.stderr
    assert "a\\x1b[2J\\x07" in r.stdout and "b\\r\\nfake line" in r.stdout
    assert not any(c in r.stdout for c in "\x1b\x07\r")
    assert "fake line" not in {line.strip() for line in r.stdout.splitlines()}


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_op_profile_escapes_control_bytes_of_tensor_names(backend, model):
    """The profile names a node by its output tensors, as TFLite does: escaped here."""
    if backend == "gpu":
        require(_gpu_available(), "an OpenCL device (PoCL here) and the GPU delegate")
    gpu = ["--use_gpu"] if backend == "gpu" else []
    r = devicefarm(*command_line("benchmark", model, ""), "--enable_op_profiling", *gpu)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.endswith("]:0")]
    assert len(rows) == 2, r.stdout  # Run Order and Top by Computation Time
    assert all(row.endswith("\t[y\\x1b[31mred]:0") for row in rows), rows
    assert "\x1b" not in r.stdout


@pytest.mark.parametrize("table", ["reference", "gpu"])
def test_ops_tables_are_aligned(table):
    """Each column starts at the same place on every row, whatever the longest op name."""
    r = devicefarm("ops", *(["--gpu"] if table == "gpu" else []))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) > 20, r.stdout
    columns = [r"  (v\[|none)"] if table == "reference" else [r"  float ", r"  quantized "]
    for column in columns:
        starts = {re.search(column, line).start() for line in lines}
        assert len(starts) == 1, (column, starts)


# -- figures say what was run ---------------------------------------------------------------


def test_diff_json_records_the_runs_asked_for(model, tmp_path):
    out = tmp_path / "d.json"
    r = devicefarm("diff", "--model", model, "--num_runs", "10", "--json", str(out))
    assert r.returncode == 0, r.stderr
    record = json.loads(out.read_text())
    assert record["num_runs"] == 10 and record["options"]["num_runs"] == 10
    assert "min_secs" not in record["options"]  # the benchmark loop's, not the diff's


# -- --help: every flag explained, with its default --------------------------------------

RUNTIME_COMMANDS = [
    "inspect",
    "invoke",
    "benchmark",
    "diff",
    "accuracy",
    "make_dataset",
    "example",
    "ops",
]


def _parsers(command: str) -> list[tuple[str, argparse.ArgumentParser]]:
    """The command's parser and, for accuracy and make-dataset, each task's."""
    parser = argparse.ArgumentParser(prog=command)
    importlib.import_module(f"delegate_runtime.commands.{command}").add_arguments(parser)
    found = [(command, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += [(f"{command} {name}", p) for name, p in action.choices.items()]
    return found


def _flag_cases() -> list:
    cases = []
    for command in RUNTIME_COMMANDS:
        for name, parser in _parsers(command):
            for group in parser._mutually_exclusive_groups:
                for action in group._group_actions:  # one of them is required: no default
                    action.required = action.required or group.required
            for action in parser._actions:
                if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                    continue
                flag = action.option_strings[-1] if action.option_strings else action.dest
                cases.append(pytest.param(action, id=f"{name} {flag}"))
    return cases


@pytest.mark.parametrize("action", _flag_cases())
def test_every_flag_has_help_showing_its_default(action):
    assert action.help and len(action.help) > 10, action
    if action.option_strings and not action.required:
        assert "default" in action.help, action.help
