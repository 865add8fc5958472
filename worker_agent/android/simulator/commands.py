"""The simulated phone's commands: getprop, dumpsys SurfaceFlinger, logcat (logcat.py),
and toybox's rm, mkdir, chmod, ls, cat, pkill, with their usual messages."""

from __future__ import annotations

import stat

from .fs import FsError
from .logcat import logcat
from .shell import Command, Context


def _flags(argv: list[str], allowed: str) -> tuple[set[str], list[str], str]:
    """Leading short flags (`-rf`), the operands, and an error for an unknown flag."""
    flags: set[str] = set()
    rest = list(argv)
    while rest and rest[0].startswith("-") and rest[0] != "-":
        word = rest.pop(0)
        if word == "--":
            break
        for f in word[1:]:
            if f not in allowed:
                return flags, rest, f"Unknown option '{f}'"
            flags.add(f)
    return flags, rest, ""


def getprop(ctx: Context) -> int:
    props = ctx.phone.props()
    if len(ctx.argv) > 1:
        ctx.write(props.get(ctx.argv[1], ctx.argv[2] if len(ctx.argv) > 2 else "") + "\n")
    else:
        ctx.write("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
    return 0


def dumpsys(ctx: Context) -> int:
    if ctx.argv[1:2] != ["SurfaceFlinger"]:
        ctx.write(f"Can't find service: {' '.join(ctx.argv[1:2])}\n")
        return 0
    g = ctx.phone.profile.gles
    ctx.write(
        "Build configuration: [sf PRESENT_TIME_OFFSET=0] [sf FORCE_HWC_FOR_RBG_TO_YUV=1]\n"
        f'Display 0 (HWC display 0): port=0 pnpId=GGL displayName="{ctx.phone.serial}"\n'
        "\n"
        f"GLES: {g.get('vendor', '')}, {g.get('renderer', '')}, {g.get('version', '')}\n"
        "GL_EXT_debug_marker GL_ARM_rgba8 GL_OES_EGL_image GL_EXT_color_buffer_float\n"
        "RenderEngine supports protected context\n"
    )
    return 0


def rm(ctx: Context) -> int:
    flags, paths, bad = _flags(ctx.argv[1:], "rfv")
    if bad:
        ctx.write(f"rm: {bad}\n")
        return 1
    status = 0
    for p in paths:
        try:
            ctx.phone.fs.remove(p, recursive="r" in flags)
        except FsError as exc:
            if "f" in flags and not ctx.phone.fs.exists(p):
                continue
            ctx.write(f"rm: {p}: {exc}\n")
            status = 1
    return status


def mkdir(ctx: Context) -> int:
    flags, paths, bad = _flags(ctx.argv[1:], "p")
    if bad:
        ctx.write(f"mkdir: {bad}\n")
        return 1
    status = 0
    for p in paths:
        try:
            ctx.phone.fs.mkdir(p, parents="p" in flags)
        except FsError as exc:
            ctx.write(f"mkdir: '{p}': {exc}\n")
            status = 1
    return status


def chmod(ctx: Context) -> int:
    if len(ctx.argv) < 3:
        ctx.write("chmod: Need 2 arguments\n")
        return 1
    try:
        mode = int(ctx.argv[1], 8)
    except ValueError:
        ctx.write(f"chmod: bad mode '{ctx.argv[1]}'\n")
        return 1
    status = 0
    for p in ctx.argv[2:]:
        try:
            ctx.phone.fs.chmod(p, mode)
        except FsError as exc:
            ctx.write(f"chmod: {p}: {exc}\n")
            status = 1
    return status


def ls(ctx: Context) -> int:
    flags, paths, bad = _flags(ctx.argv[1:], "l1a")
    if bad:
        ctx.write(f"ls: {bad}\n")
        return 1
    status = 0
    for p in paths or ["/"]:
        fs = ctx.phone.fs
        try:
            node = fs.get(p)
            names = fs.listdir(p) if node.is_dir else [p]
        except FsError as exc:
            ctx.write(f"ls: {p}: {exc}\n")
            status = 1
            continue
        for name in names:
            if "l" in flags:
                full = name if not node.is_dir else fs.norm(f"{p}/{name}")
                n = fs.get(full)
                ctx.write(f"{stat.filemode(n.mode)} 1 shell shell {len(n.data)} {name}\n")
            else:
                ctx.write(name + "\n")
    return status


def cat(ctx: Context) -> int:
    status = 0
    for p in ctx.argv[1:]:
        try:
            ctx.write(ctx.phone.fs.read(p))
        except FsError as exc:
            ctx.write(f"cat: {p}: {exc}\n")
            status = 1
    return status


def pkill(ctx: Context) -> int:
    """pkill [-f] PATTERN: -f matches the whole command line, else the program's name."""
    flags, rest, bad = _flags(ctx.argv[1:], "f")
    if bad or len(rest) != 1:
        ctx.write("pkill: Need 1 argument\n" if not bad else f"pkill: {bad}\n")
        return 1
    pattern = rest[0]
    hits = 0
    with ctx.phone.lock:
        for proc in ctx.phone.processes:
            if proc is ctx.process:
                continue
            text = " ".join(proc.argv) if "f" in flags else proc.argv[0].rsplit("/", 1)[-1]
            if pattern in text:
                proc.killed.set()
                hits += 1
    return 0 if hits else 1


BUILTINS: dict[str, Command] = {
    "getprop": getprop,
    "dumpsys": dumpsys,
    "rm": rm,
    "mkdir": mkdir,
    "chmod": chmod,
    "ls": ls,
    "cat": cat,
    "pkill": pkill,
    "logcat": logcat,
}
