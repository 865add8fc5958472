"""The simulated `shell:` service (v1, raw: stdout and stderr merged, no exit status).

Not a shell: a line is checked for shell syntax a real `sh` would act on (unquoted
operators, substitutions, globs, comments), then split with shlex; only simulated
commands run. Every line is recorded, and lines with shell syntax are refused and
recorded as violations, so tests can prove exactly what reached the phone.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .transport import Stream

if TYPE_CHECKING:
    from .device import SimulatedPhone

#: Characters an unquoted `sh` word must not contain for the line to be plain argv.
_OPERATORS = set(";&|<>()`\n\r*?#~{}")
#: Exit statuses as mksh reports them.
NOT_FOUND, CANNOT_EXECUTE = 127, 126


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
    with phone.lock:
        phone.processes.append(process)
    try:
        return command(Context(phone, stream, process))
    finally:
        with phone.lock:
            phone.processes.remove(process)


def shell_service(phone: SimulatedPhone, line: str) -> Callable[[Stream], None]:
    def serve(stream: Stream) -> None:
        run_line(phone, stream, line)

    return serve
