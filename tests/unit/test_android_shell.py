"""The simulated shell: shell syntax is detected and refused, simulated commands answer
as toybox does, and the runner's quoting never produces shell syntax."""

from __future__ import annotations

import shlex

import pytest

from worker_agent.android import invocations
from worker_agent.android.simulator import SimulatedPhone
from worker_agent.android.simulator.shell import run_line, shell_syntax


class FakeStream:
    def __init__(self):
        self.data = b""
        import threading

        self.closed = threading.Event()

    def write(self, data: bytes) -> None:
        self.data += data


@pytest.fixture
def phone():
    return SimulatedPhone("galaxy-s23")


def run(phone, line: str) -> tuple[int, str]:
    s = FakeStream()
    status = run_line(phone, s, line)
    return status, s.data.decode()


@pytest.mark.parametrize(
    "line",
    [
        "a;reboot",
        "a && b",
        "a | b",
        "a > f",
        "$(id)",
        "`id`",
        "echo $HOME",
        "a\nb",
        "ls *",
        "x # comment",
        'echo "$(id)"',
        "echo 'open",
        "(a)",
    ],  # fmt: skip
)
def test_shell_syntax_is_found(line) -> None:
    assert shell_syntax(line)


@pytest.mark.parametrize(
    "name",
    ["a;reboot.tflite", "$(id).tflite", "`id`.tflite", "a\nreboot.tflite", "-rf", "'\"'", "*"],
)
def test_quoted_words_are_plain(name) -> None:
    line = shlex.join(["rm", "-f", name])
    assert shell_syntax(line) == [] and shlex.split(line) == ["rm", "-f", name]


def test_refused_lines_are_recorded_as_violations(phone) -> None:
    status, out = run(phone, "getprop; reboot")
    assert status == 2 and "not simulated" in out
    assert phone.commands == phone.violations == ["getprop; reboot"]


def test_getprop_and_dumpsys(phone) -> None:
    assert run(phone, "getprop ro.soc.model") == (0, "SM8550\n")
    assert "[ro.hardware.egl]: [adreno]\n" in run(phone, "getprop")[1]
    out = run(phone, "dumpsys SurfaceFlinger")[1]
    assert "\nGLES: Qualcomm, Adreno (TM) 740, OpenGL ES 3.2 V@0676.32" in out


def test_file_commands(phone) -> None:
    assert run(phone, "mkdir -p /data/local/tmp/a/b") == (0, "")
    phone.fs.write("/data/local/tmp/a/b/f", b"hello\n")
    assert run(phone, "cat /data/local/tmp/a/b/f") == (0, "hello\n")
    assert run(phone, "ls /data/local/tmp/a/b") == (0, "f\n")
    assert run(phone, "chmod 755 /data/local/tmp/a/b/f") == (0, "")
    assert run(phone, "ls -l /data/local/tmp/a/b")[1].startswith("-rwxr-xr-x")
    assert run(phone, "rm /data/local/tmp/nope")[0] == 1
    assert run(phone, "rm -f /data/local/tmp/nope") == (0, "")
    assert run(phone, "rm -r /data/local/tmp/a") == (0, "")
    assert not phone.fs.exists("/data/local/tmp/a/b/f")
    assert run(phone, "cat /sys/class/thermal/thermal_zone2/type") == (0, "gpuss-0\n")


def test_programs_need_to_exist_and_be_executable(phone) -> None:
    status, out = run(phone, "/data/local/tmp/benchmark_model --graph=x")
    assert status == 127 and "inaccessible or not found" in out
    phone.fs.write("/data/local/tmp/benchmark_model", b"\x7fELF", mode=0o644)
    status, out = run(phone, "/data/local/tmp/benchmark_model --graph=x")
    assert status == 126 and "Permission denied" in out
    phone.fs.chmod("/data/local/tmp/benchmark_model", 0o755)
    status, out = run(phone, "/data/local/tmp/benchmark_model --graph=/data/local/tmp/none")
    assert status == 1 and "Could not open '/data/local/tmp/none'" in out
    assert run(phone, "reboot")[0] == 127


def test_runner_lines_are_plain_argv() -> None:
    from farm_core.configs import CONFIGS

    sha = "ab" * 32
    argv = invocations.benchmark_argv(
        invocations.tool_path("benchmark_model", sha), invocations.model_path(sha),
        CONFIGS["gpu-fp16"], {"num_runs": 7, "min_secs": 0.5},
    )  # fmt: skip
    line = invocations.line(argv)
    assert shell_syntax(line) == [] and shlex.split(line) == argv
    assert "--use_gpu=true" in argv and "--gpu_precision_loss_allowed=true" in argv
    assert f"--graph=/data/local/tmp/devicefarm/{sha}.tflite" in argv


@pytest.mark.parametrize("bad", ["", "a;reboot", "AB" * 32, "ab" * 31, "../" + "a" * 61])
def test_model_paths_take_only_sha256_digests(bad) -> None:
    from delegate_runtime.errors import JobError

    with pytest.raises(JobError):
        invocations.model_path(bad)
