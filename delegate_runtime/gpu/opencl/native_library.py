"""The hot path's native library: its C code compiled once per machine, where a C compiler
is at hand.

Two sources, each with the module that calls it: `launch_loop.c`, the launch loop
(hot_path.py; NVIDIA's driver takes about 10 us a launch on the H200's hosts and Python's
loop around it, through ctypes, another 1.5-2:
docs/notebook/10-2026-11-27-the-launch-loop-in-c-how-the-host-waits.md), which calls the
entry points of the OpenCL library capi.py loaded, so it builds without OpenCL's headers;
and `host_copy.c`, an input's copy into host memory shared with helper threads
(host_copy.py). Each module declares its own entry point (`hot_path.declare_loop`,
`host_copy.declare_copy`). Both are compiled into one library, once per source, machine
and compiler (the compiler checked: what its `--version` says is part of the key), into
the kernel cache's folder (private, written through a rename). Beside the library lies
the sha256 of the file as built; a library that does not match it is built again before
it is loaded.

One switch governs the whole library (gpu/switches.py `native_loop`,
DEVICEFARM_NATIVE_LOOP=0): off, or without a working compiler, `native_library()` is None,
so the launch loop runs in Python and inputs are copied by numpy alone, whatever helper
threads the plan names. (A result stored with it off ran both that way, and its record's
`gpu.native_loop` keeps meaning that.) `unavailable()` says why, `build_identity()` which
compiler and which build the library is.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from ..switches import KNOBS, Switches
from . import host_copy, hot_path
from .cache import default_cache_dir, ensure_private_dir

SOURCES = tuple(Path(__file__).with_name(n) for n in ("launch_loop.c", "host_copy.c"))
COMPILE_TIMEOUT_S = 60
VERSION_TIMEOUT_S = 10
_lock = threading.Lock()
_state: dict[str, object] = {}  #: "lib" (CDLL or None) and "why" once decided


def compiler(switches: Switches | None = None) -> str | None:
    """The switches' `cc` ($CC) where set and found, else the first of cc, gcc, clang on PATH."""
    cc = (Switches.from_env() if switches is None else switches).cc
    if cc:
        return shutil.which(cc.split()[0]) and cc
    return next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)


@functools.lru_cache(maxsize=8)
def compiler_identity(cc: str) -> str:
    """The first line `cc --version` prints; OSError where the compiler does not run."""
    try:
        done = subprocess.run(
            [*cc.split(), "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except subprocess.SubprocessError as exc:
        raise OSError(f"{cc} --version: {exc}") from exc
    first = (done.stdout or done.stderr).strip().splitlines()[:1]
    if done.returncode != 0 or not first:
        raise OSError(f"{cc} --version exited {done.returncode}: {done.stderr.strip()[:200]}")
    return first[0]


def library_path(cache_dir: Path, cc: str) -> Path:
    """Where the build for this source, machine and compiler lives."""
    key = hashlib.sha256(b"".join(s.read_bytes() for s in SOURCES))
    key.update(f"|{cc}|{compiler_identity(cc)}|{platform.machine()}".encode())
    return cache_dir / "native" / f"launch_loop-{key.hexdigest()[:16]}.so"


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digest_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def verified(target: Path) -> bool:
    """Whether the library is the file its build wrote (its recorded sha256)."""
    try:
        return _digest_path(target).read_text().strip() == file_digest(target)
    except OSError:
        return False


def build(cache_dir: Path, cc: str) -> Path:
    """Compile the sources unless a verified build is cached; raises on a failed build."""
    target = library_path(cache_dir, cc)
    if verified(target):
        return target
    ensure_private_dir(target.parent)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        cmd = [*cc.split(), "-O2", "-shared", "-fPIC", "-pthread", "-o", tmp, *map(str, SOURCES)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=COMPILE_TIMEOUT_S)
        digest = file_digest(Path(tmp))
        # the digest first: a reader seeing the new library finds its digest already there
        # (concurrent builders of one source write the same bytes)
        fd2, tmp_digest = tempfile.mkstemp(suffix=".sha256", dir=target.parent)
        with os.fdopen(fd2, "w") as f:
            f.write(digest + "\n")
        os.replace(tmp_digest, _digest_path(target))
        os.replace(tmp, target)  # concurrent builders each rename a whole file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _load(cache_dir: Path, switches: Switches) -> tuple[ctypes.CDLL | None, str]:
    cc = compiler(switches)
    if cc is None:
        return None, "no C compiler (cc, gcc, clang or $CC) on PATH"
    try:
        path = build(cache_dir, cc)
        lib = ctypes.CDLL(str(path))
        _state["build"] = f"{compiler_identity(cc)}; sha256 {file_digest(path)[:16]}"
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        names = ", ".join(s.name for s in SOURCES)
        return None, f"building {names} failed: {exc} {detail.decode(errors='replace')}"
    hot_path.declare_loop(lib)
    host_copy.declare_copy(lib)
    return lib, ""


def native_library(
    cache_dir: Path | None = None, switches: Switches | None = None
) -> ctypes.CDLL | None:
    """The built library (decided once per process, by the first switches that ask), or None (also where `switches`,
    None: the environment's now, turn it off: then neither the C loop nor the C copy runs)."""
    switches = Switches.from_env() if switches is None else switches
    if not switches.native_loop:
        return None
    with _lock:
        if "lib" not in _state:
            _state["lib"], _state["why"] = _load(cache_dir or default_cache_dir(), switches)
        return _state["lib"]  # type: ignore[return-value]


def build_identity() -> str:
    """Which compiler built the library (the C loop's and the copy's) and its digest ("" without one)."""
    return str(_state.get("build", ""))


def unavailable(switches: Switches | None = None) -> str:
    """Why there is no library, so the Python loop runs and numpy copies ("" when the C
    loop does, or before it was decided):
    `switches` (None: the environment's now) turning it off, or the build's failure."""
    switches = Switches.from_env() if switches is None else switches
    if not switches.native_loop:
        if switches.source("native_loop") == "env":
            return f"{KNOBS['native_loop'].env}=0"
        return "the native_loop switch is off"
    return str(_state.get("why", ""))


def forget() -> None:
    """Decide again on the next call (tests)."""
    with _lock:
        _state.clear()
