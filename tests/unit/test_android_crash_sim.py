"""The simulated phone's crash trail: a program killed by a signal prints mksh's line and
exits 128+N, debuggerd's tombstone lands in /data/tombstones (readable only when adbd runs
as root), and `logcat` shows libc's Fatal signal line and the tombstone under DEBUG in the
crash buffer, in threadtime's layout; logcat refuses what the real one refuses."""

from __future__ import annotations

import re
import threading

import pytest

from worker_agent.android.simulator import SimulatedPhone, debuggerd, load_profile
from worker_agent.android.simulator.shell import run_line

TOOL = "/data/local/tmp/benchmark_model"
#: `logcat -v threadtime`: date time.ms pid tid priority tag: message
THREADTIME = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +(\d+) +(\d+) ([VDIWEF]) (.{8}): (.*)$")


class FakeStream:
    def __init__(self) -> None:
        self.data = b""
        self.closed = threading.Event()

    def write(self, data: bytes) -> None:
        self.data += data


def run(phone: SimulatedPhone, line: str) -> tuple[int, str]:
    s = FakeStream()
    status = run_line(phone, s, line)
    return status, s.data.decode(errors="replace")


def make_phone(root: bool = False) -> SimulatedPhone:
    profile = load_profile("galaxy-s23")
    if root:
        profile.props |= {"ro.debuggable": "1", "service.adb.root": "1"}
    phone = SimulatedPhone(profile)
    phone.fs.write(TOOL, b"\x7fELF fake", mode=0o755)
    return phone


@pytest.fixture
def phone() -> SimulatedPhone:
    return make_phone()


def test_a_fresh_phone_dumps_an_empty_log(phone) -> None:
    assert run(phone, "logcat -d -v threadtime") == (0, "")


def test_a_crash_at_start_prints_the_shells_line_and_exits_128_plus_the_signal(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGILL")
    assert run(phone, f"{TOOL} --graph=/data/local/tmp/m.tflite") == (132, "Illegal instruction\n")


def test_a_crash_after_two_lines_keeps_those_lines(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV", after_lines=2)
    status, out = run(phone, TOOL)  # no --graph: it would print an error later
    assert status == 139
    assert out == "STARTING!\nLog parameter values verbosely: [0]\nSegmentation fault\n"


def test_a_crash_past_the_programs_output_comes_as_it_exits(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGABRT", after_lines=1000)
    status, out = run(phone, TOOL)
    assert status == 134
    assert out.endswith("ERROR: Benchmarking failed.\nAborted\n")


def test_an_armed_crash_fires_once(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, TOOL)
    status, out = run(phone, TOOL)
    assert status == 1 and "Segmentation fault" not in out


def test_logcat_threadtime_shows_libcs_fatal_signal_line_in_the_crash_buffer(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, TOOL)
    status, out = run(phone, "logcat -d -v threadtime")
    lines = out.splitlines()
    assert status == 0 and lines[0] == "--------- beginning of crash"
    pid, tid, prio, tag, msg = THREADTIME.match(lines[1]).groups()
    assert (pid, prio, tag) == (tid, "F", "libc    ")
    assert msg == (f"Fatal signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0 in tid "
                   f"{pid} (benchmark_model), pid {pid} (benchmark_model)")  # fmt: skip


def test_logcat_carries_the_tombstone_under_debug(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, f"{TOOL} --graph=/m.tflite")
    _, out = run(phone, "logcat -d -v threadtime -b crash")
    debug = [THREADTIME.match(x).group(5) for x in out.splitlines() if " F DEBUG   : " in x]
    assert debug[0] == debuggerd.BANNER
    assert f"Cmdline: {TOOL} --graph=/m.tflite" in debug
    assert "signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0000000000000000" in debug


def test_tombstoned_names_the_file_in_the_main_buffer(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, TOOL)
    _, out = run(phone, "logcat -d -b main -v brief")
    assert "E/tombstoned(  700): Tombstone written to: /data/tombstones/tombstone_00" in out


def test_the_shell_user_cannot_list_or_read_tombstones(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, TOOL)
    assert run(phone, "ls /data/tombstones") == (1, "ls: /data/tombstones: Permission denied\n")
    status, out = run(phone, "cat /data/tombstones/tombstone_00")
    assert (status, out) == (1, "cat: /data/tombstones/tombstone_00: Permission denied\n")


def test_a_root_shell_reads_the_tombstone_with_its_signal() -> None:
    phone = make_phone(root=True)
    debuggerd.arm(phone, "benchmark_model", "SIGILL")
    run(phone, TOOL)
    assert run(phone, "ls /data/tombstones") == (0, "tombstone_00\n")
    _, text = run(phone, "cat /data/tombstones/tombstone_00")
    assert text.startswith(debuggerd.BANNER + "\nBuild fingerprint: '")
    assert re.search(r"^signal 4 \(SIGILL\), code 1 \(ILL_ILLOPC\), fault addr 0x[0-9a-f]{16}$",
                     text, re.M)  # fmt: skip
    assert re.search(r"^pid: (\d+), tid: \1, name: benchmark_model  >>> " + TOOL + " <<<$",
                     text, re.M)  # fmt: skip


def test_each_crash_takes_the_next_tombstone() -> None:
    phone = make_phone(root=True)
    for _ in range(2):
        debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
        run(phone, TOOL)
    assert run(phone, "ls /data/tombstones")[1] == "tombstone_00\ntombstone_01\n"


def test_a_sigabrt_tombstone_has_its_abort_message() -> None:
    phone = make_phone(root=True)
    debuggerd.arm(phone, "benchmark_model", "SIGABRT", abort_message="Check failed: ok")
    run(phone, TOOL)
    text = run(phone, "cat /data/tombstones/tombstone_00")[1]
    assert "signal 6 (SIGABRT), code -6 (SI_TKILL), fault addr --------\n" in text
    assert "Abort message: 'Check failed: ok'\n" in text


def test_the_tools_own_segfault_leaves_a_crash_trail_too(phone) -> None:
    phone.profile.faults.garbage = "noise"
    status, _ = run(phone, f"{TOOL} --graph=/data/local/tmp/m.tflite")
    assert status == 139
    assert "Fatal signal 11 (SIGSEGV)" in run(phone, "logcat -d")[1]


def test_logcat_c_clears_the_default_buffers(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, TOOL)
    assert run(phone, "logcat -c") == (0, "")
    assert run(phone, "logcat -d") == (0, "")


def test_logcat_t_keeps_the_last_lines(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, TOOL)
    _, out = run(phone, "logcat -t 1 -b main -v tag")
    assert out == ("--------- beginning of main\n"
                   "E/tombstoned: Tombstone written to: /data/tombstones/tombstone_00\n")  # fmt: skip


def test_logcat_filterspecs_keep_errors_only(phone) -> None:
    debuggerd.arm(phone, "benchmark_model", "SIGSEGV")
    run(phone, TOOL)
    _, out = run(phone, "logcat -d -v tag '*:E'")
    assert "I/tombstoned" not in out and "E/tombstoned" in out and "F/libc" in out


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("logcat -z", "logcat: Unknown option '-z'.\n"),
        ("logcat -d -v fancy", "logcat: Invalid -v parameter 'fancy'.\n"),
        ("logcat -d -b nope", "logcat: Unknown buffer 'nope' listed for -b.\n"),
        ("logcat -t 0", "logcat: -t '0' not an integer or time.\n"),
        ("logcat -d -v", "logcat: Option '-v' requires an argument.\n"),
        ("logcat -d tflite:Q", "logcat: Invalid filter expression 'tflite:Q'.\n"),
    ],
)
def test_logcat_refuses_what_the_real_one_refuses(phone, line: str, said: str) -> None:
    assert run(phone, line) == (1, said)
