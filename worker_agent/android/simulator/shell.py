"""The simulated `shell:` service (v1, raw: stdout and stderr merged, no exit status).

Not a shell: a line is checked for shell syntax a real `sh` would act on (unquoted
operators, substitutions, globs, comments), then split with shlex; only simulated
commands run. Every line is recorded, and lines with shell syntax are refused and
recorded as violations, so tests can prove exactly what reached the phone.
"""

from __future__ import annotations

import itertools
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import debuggerd
from .transport import Stream, StreamClosed

if TYPE_CHECKING:
    from .device import SimulatedPhone

#: Characters an unquoted `sh` word must not contain for the line to be plain argv.
_OPERATORS = set(";&|<>()`\n\r*?#~{}")
#: Exit statuses as mksh reports them.
NOT_FOUND, CANNOT_EXECUTE = 127, 126
#: Process ids the simulated programs get (a phone's shell children start high).
_PIDS = itertools.count(12000)


def shell_syntax(line: str) -> list[str]:
    """What a real shell would interpret in `line` (empty: the line is plain words)."""
    found: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        c = line[i]
        nxt = line[i + 1 : i + 2]
        if quote == "'":
            if c == "'":
                quote = ""
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = ""
            elif c == "`" or (c == "$" and (nxt.isalnum() or nxt in "({_@*#?$!-")):
                found.append(f"{c}{nxt} in double quotes")
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "$":
            found.append("$" + nxt)
        elif c in _OPERATORS:
            found.append(repr(c))
        i += 1
    if quote:
        found.append(f"unterminated {quote}")
    return found


@dataclass
class Process:
    """A simulated command while it runs (pkill sets `killed`)."""

    argv: list[str]
    killed: threading.Event = field(default_factory=threading.Event)
    pid: int = field(default_factory=lambda: next(_PIDS))


class CrashPoint:
    """A program's output stream that kills it with an armed crash's signal once it has
    printed the crash's lines (`fired`: the signal was delivered)."""

    def __init__(self, stream: Stream, process: Process, lines: int):
        self.stream, self.process, self.left = stream, process, lines
        self.closed = stream.closed
        self.fired = False

    def fire(self) -> None:
        self.fired = True
        self.process.killed.set()

    def write(self, data: bytes) -> None:
        if self.fired:
            raise StreamClosed("killed by a signal")
        cut = -1
        while self.left > 0 and (cut := data.find(b"\n", cut + 1)) >= 0:
            self.left -= 1
        if self.left > 0 or cut < 0:
            self.stream.write(data)
            return
        self.stream.write(data[: cut + 1])
        self.fire()
        raise StreamClosed("killed by a signal")


class Context:
    """What a simulated command sees: its arguments, the phone, and its output."""

    def __init__(self, phone: SimulatedPhone, stream: Stream, process: Process):
        self.phone = phone
        self.stream = stream
        self.process = process

    @property
    def argv(self) -> list[str]:
        return self.process.argv

    def write(self, text: str | bytes) -> None:
        self.stream.write(text.encode() if isinstance(text, str) else text)

    def cancelled(self) -> bool:
        return self.process.killed.is_set() or self.stream.closed.is_set()

    def sleep(self, seconds: float) -> bool:
        """Sleep unless killed or hung up; True when the sleep ran to its end."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self.cancelled():
                return False
            self.process.killed.wait(min(left, 0.05))
        return not self.cancelled()


Command = Callable[[Context], int]


def run_line(phone: SimulatedPhone, stream: Stream, line: str) -> int:
    """Run one `shell:` command line on `phone`, writing its output to `stream`."""
    from .commands import BUILTINS
    from .tools import program_for

    phone.record(line)
    syntax = shell_syntax(line)
    if syntax:
        phone.violations.append(line)
        stream.write(f"sim: shell syntax is not simulated: {', '.join(syntax)}\n".encode())
        return 2
    argv = shlex.split(line)
    if not argv:
        return 0
    name = argv[0]
    command: Command | None = BUILTINS.get(name)
    if command is None and name.startswith("/"):
        node = phone.fs.nodes.get(phone.fs.norm(name))
        if node is None or node.is_dir:
            stream.write(f"/system/bin/sh: {name}: inaccessible or not found\n".encode())
            return NOT_FOUND
        if not node.mode & 0o111:
            stream.write(f"/system/bin/sh: {name}: can't execute: Permission denied\n".encode())
            return CANNOT_EXECUTE
        command = program_for(name)
    if command is None:
        stream.write(f"/system/bin/sh: {name}: inaccessible or not found\n".encode())
        return NOT_FOUND
    process = Process(argv)
    crash = debuggerd.take(phone, name.rsplit("/", 1)[-1])
    with phone.lock:
        phone.processes.append(process)
    try:
        if crash is None:
            status = command(Context(phone, stream, process))
        else:
            status = _crashing(phone, stream, process, command, crash)
    finally:
        with phone.lock:
            phone.processes.remove(process)
    signal = debuggerd.signal_of_status(status)
    if signal is not None:
        debuggerd.report(phone, argv, process.pid, signal, crash.abort_message if crash else "")
    return status


def _crashing(
    phone: SimulatedPhone,
    stream: Stream,
    process: Process,
    command: Command,
    crash: debuggerd.Crash,
) -> int:
    """Run `command` until its armed crash (at its start, after its lines, or as it exits:
    whichever comes first); mksh's line for the signal, and its status."""
    if crash.after_lines > 0:
        point = CrashPoint(stream, process, crash.after_lines)
        try:
            command(Context(phone, point, process))  # type: ignore[arg-type]
        except StreamClosed:
            if not point.fired:
                raise
    stream.write(f"{crash.signal.shell_message}\n".encode())
    return 128 + crash.signal.number


def shell_service(phone: SimulatedPhone, line: str) -> Callable[[Stream], None]:
    def serve(stream: Stream) -> None:
        run_line(phone, stream, line)

    return serve
