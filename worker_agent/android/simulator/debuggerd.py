"""The simulated phone's crash reporting: a native program killed by a signal leaves what
Android's debuggerd (crash_dump and tombstoned) leaves on a real phone.

- the tombstone, `/data/tombstones/tombstone_NN` (NN from 00 to 31, the oldest reused),
  in the text layout of Android 12+ (signal line, registers, backtrace); the folder and
  its files are system's (0771 and 0600): only a phone whose adbd runs as root
  (`ro.debuggable=1` and `service.adb.root=1`) lets the shell user list and read them;
- the crash buffer: libc's `Fatal signal` line and every line of the tombstone under the
  tag DEBUG, which `logcat` shows by default whoever reads it;
- tombstoned's `Tombstone written to:` line in the main buffer.

Tests make a program crash with `arm(phone, program, signal, after_lines)`.
"""

from __future__ import annotations

import itertools
import stat
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from . import logd
from .fs import FsError

TOMBSTONE_DIR = "/data/tombstones"
#: tombstoned keeps this many tombstones (tombstone_00 .. tombstone_31).
MAX_TOMBSTONES = 32
SHELL_UID = 2000
#: The line a tombstone starts with, and each of its DEBUG lines in the crash buffer.
BANNER = "*** *** *** *** *** *** *** *** *** *** *** *** *** *** *** ***"


@dataclass(frozen=True)
class Signal:
    name: str
    number: int
    code: str  #: si_code as debuggerd names it, with its number
    shell_message: str  #: what mksh prints for a child killed by it (bionic's strsignal)


SIGNALS = {
    s.name: s
    for s in (
        Signal("SIGILL", 4, "1 (ILL_ILLOPC)", "Illegal instruction"),
        Signal("SIGABRT", 6, "-6 (SI_TKILL)", "Aborted"),
        Signal("SIGBUS", 7, "1 (BUS_ADRALN)", "Bus error"),
        Signal("SIGFPE", 8, "1 (FPE_INTDIV)", "Floating point exception"),
        Signal("SIGSEGV", 11, "1 (SEGV_MAPERR)", "Segmentation fault"),
    )
}
_BY_NUMBER = {s.number: s for s in SIGNALS.values()}
#: ro.product.cpu.abi -> the ABI line of a tombstone
_ABI = {"arm64-v8a": "arm64", "armeabi-v7a": "arm", "x86_64": "x86_64", "x86": "x86"}
_PIDS = itertools.count(4000)


def signal_of_status(status: int) -> Signal | None:
    """The crash signal a shell's exit status (128 + signal) says, if any."""
    return _BY_NUMBER.get(status - 128) if status > 128 else None


@dataclass(frozen=True)
class Crash:
    """An armed crash: the next run of `program` dies of `signal` after printing
    `after_lines` lines (0: at its start; past its output: as it exits)."""

    program: str
    signal: Signal
    after_lines: int = 0
    abort_message: str = ""


_ARMED: weakref.WeakKeyDictionary[Any, list[Crash]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def arm(
    phone: Any, program: str, signal: str, after_lines: int = 0, abort_message: str = ""
) -> None:
    """Make the next run of `program` (a file name, e.g. benchmark_model) on `phone` crash."""
    crash = Crash(program, SIGNALS[signal], after_lines, abort_message)
    with _LOCK:
        _ARMED.setdefault(phone, []).append(crash)


def take(phone: Any, program: str) -> Crash | None:
    """The crash armed for this run of `program` (disarmed: it fires once)."""
    with _LOCK:
        armed = _ARMED.get(phone, [])
        for i, crash in enumerate(armed):
            if crash.program == program:
                return armed.pop(i)
    return None


def shell_is_root(phone: Any) -> bool:
    props = phone.props()
    return props.get("ro.debuggable") == "1" and props.get("service.adb.root") == "1"


def _fault_addr(signal: Signal, pc: int) -> str:
    if signal.name == "SIGABRT":
        return "--------"
    return f"0x{0 if signal.name == 'SIGSEGV' else pc:016x}"


def tombstone_text(
    phone: Any, argv: list[str], pid: int, signal: Signal, abort_message: str = ""
) -> str:
    """The tombstone debuggerd writes for `argv`'s process `pid` killed by `signal`."""
    props = phone.props()
    name = argv[0].rsplit("/", 1)[-1]
    pc = 0x58A1B2C3E8
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now))
    lines = [
        BANNER,
        f"Build fingerprint: '{props.get('ro.build.fingerprint', 'unknown')}'",
        f"Revision: '{props.get('ro.revision', '0')}'",
        f"ABI: '{_ABI.get(props.get('ro.product.cpu.abi', ''), 'arm64')}'",
        f"Timestamp: {stamp}.{int(now * 1e9) % 10**9:09d}+0000",
        "Process uptime: 1s",
        f"Cmdline: {' '.join(argv)}",
        f"pid: {pid}, tid: {pid}, name: {name[:15]}  >>> {argv[0]} <<<",
        f"uid: {SHELL_UID}",
        f"signal {signal.number} ({signal.name}), code {signal.code}, "
        f"fault addr {_fault_addr(signal, pc)}",
    ]
    if signal.name == "SIGSEGV":
        lines.append("Cause: null pointer dereference")
    if abort_message:
        lines.append(f"Abort message: '{abort_message}'")
    regs = [f"x{i:<2} {(i * 0x1F3D5B79) & 0xFFFFFFFFFF:016x}" for i in range(4)]
    lines += ["    " + "  ".join(regs), f"    sp  0000007fc0a1b1a0  lr  {pc - 0x14:016x}  "
              f"pc  {pc:016x}  pst 0000000060001000", "", "backtrace:"]  # fmt: skip
    frames = ("tflite::Subgraph::Invoke()", "tflite::Interpreter::Invoke()",
              "tflite::benchmark::BenchmarkTfLiteModel::RunImpl()", "main")  # fmt: skip
    for i, fn in enumerate(frames):
        lines.append(
            f"      #{i:02d} pc {0x1B23E8 + i * 0x1A4:016x}  {argv[0]} ({fn}+{20 + i * 8})"
        )
    return "\n".join(lines) + "\n"


def _slot(phone: Any) -> str:
    """The next tombstone's path: the first unused of 00..31, else the oldest."""
    fs = phone.fs
    paths = [f"{TOMBSTONE_DIR}/tombstone_{i:02d}" for i in range(MAX_TOMBSTONES)]
    unused = [p for p in paths if not fs.exists(p)]
    return unused[0] if unused else min(paths, key=lambda p: fs.get(p).mtime)


def _write(phone: Any, text: str) -> str | None:
    """Write the tombstone where tombstoned keeps them; its path (None: the disk is full)."""
    fs, readable = phone.fs, shell_is_root(phone)
    try:
        with fs.lock:
            if not fs.exists(TOMBSTONE_DIR):
                fs.mkdir(TOMBSTONE_DIR, parents=True)
            fs.get(TOMBSTONE_DIR).mode = stat.S_IFDIR | 0o771
            fs.get(TOMBSTONE_DIR).readable = readable
            path = _slot(phone)
            fs.write(path, text.encode(), mode=0o600)
            fs.get(path).readable = readable
            return path
    except FsError:
        return None


def report(phone: Any, argv: list[str], pid: int, signal: Signal, abort_message: str = "") -> str:
    """What debuggerd does for a crashed process: the crash buffer's lines, the tombstone,
    tombstoned's line. Returns the tombstone's text."""
    logs = logd.for_phone(phone)
    name = argv[0].rsplit("/", 1)[-1][:15]
    addr = _fault_addr(signal, 0x58A1B2C3E8)
    short = "0x0" if addr.startswith("0x0000000000000000") else addr
    logs.log("crash", "F", "libc",
             f"Fatal signal {signal.number} ({signal.name}), code {signal.code}, fault addr "
             f"{short} in tid {pid} ({name}), pid {pid} ({name})", pid)  # fmt: skip
    text = tombstone_text(phone, argv, pid, signal, abort_message)
    dump_pid = next(_PIDS)
    logs.log("crash", "F", "DEBUG", text.rstrip("\n"), dump_pid)
    path = _write(phone, text)
    tombstoned = 700
    logs.log("main", "I", "tombstoned", f"received crash request for pid {pid}", tombstoned)
    if path is not None:
        logs.log("main", "E", "tombstoned", f"Tombstone written to: {path}", tombstoned)
    return text
