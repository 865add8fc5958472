"""The simulated `logcat`: -c, -d, -t N, -v FORMAT, -b BUFFER, -s and filterspecs
(TAG:PRIORITY, *:PRIORITY), as Android 11+'s logcat takes them and with its error lines
(`logcat: ...`, status 1) for anything else. Without -d, -c or -t it follows the log until
killed, as the real one does.
"""

from __future__ import annotations

from . import logd
from .shell import Context

FORMATS = ("brief", "long", "process", "raw", "tag", "thread", "threadtime", "time")
#: Options that take a value (getopt's "b:v:t:").
_WITH_VALUE = set("bvt")
_FLAGS = set("cds")
_FOLLOW_POLL_S = 0.2


class _Usage(Exception):
    """A command line logcat refuses; str() is its `logcat: ` line."""


def _buffers(value: str) -> tuple[str, ...]:
    out: list[str] = []
    for name in value.split(","):
        if name == "all":
            out += logd.BUFFERS
        elif name == "default":
            out += logd.DEFAULT
        elif name in logd.BUFFERS:
            out.append(name)
        else:
            raise _Usage(f"Unknown buffer '{name}' listed for -b.")
    return tuple(out)


def _filter(spec: str) -> tuple[str, str]:
    tag, _, prio = spec.partition(":")
    prio = (prio or "V").upper()
    if not tag or prio not in logd.PRIORITIES + "S" or len(prio) != 1:
        raise _Usage(f"Invalid filter expression '{spec}'.")
    return tag, prio


def _parse(argv: list[str]) -> dict:
    opts: dict = {"flags": set(), "v": "threadtime", "b": (), "t": None, "filters": []}
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        if not word.startswith("-") or word == "-":
            opts["filters"].append(_filter(word))
            continue
        for i, c in enumerate(word[1:], start=1):
            if c in _FLAGS:
                opts["flags"].add(c)
                continue
            if c not in _WITH_VALUE:
                raise _Usage(f"Unknown option '{word}'.")
            value = word[i + 1 :] or (rest.pop(0) if rest else None)
            if value is None:
                raise _Usage(f"Option '-{c}' requires an argument.")
            if c == "v":
                if value not in FORMATS:
                    raise _Usage(f"Invalid -v parameter '{value}'.")
                opts["v"] = value
            elif c == "b":
                opts["b"] += _buffers(value)
            elif not value.isdigit() or int(value) < 1:
                raise _Usage(f"-t '{value}' not an integer or time.")
            else:
                opts["t"] = int(value)
            break
    return opts


def _shown(entry: logd.Entry, filters: list[tuple[str, str]], silent: bool) -> bool:
    """Filterspecs as logcat applies them: the entry's tag's rule, else `*`'s, else all
    (or none after -s, which is `*:S`)."""
    rules = dict(filters)
    floor = rules.get(entry.tag, rules.get("*", "S" if silent else "V"))
    if floor == "S":
        return False
    return logd.PRIORITIES.index(entry.priority) >= logd.PRIORITIES.index(floor)


def _lines(entries: list[logd.Entry], fmt: str, seen: set[str]) -> str:
    out = []
    for e in entries:
        if e.buffer not in seen:
            seen.add(e.buffer)
            out.append(f"--------- beginning of {e.buffer}")
        out.append(logd.format_entry(e, fmt))
    return "".join(line + "\n" for line in out)


def logcat(ctx: Context) -> int:
    try:
        opts = _parse(ctx.argv[1:])
    except _Usage as exc:
        ctx.write(f"logcat: {exc}\n")
        return 1
    logs = logd.for_phone(ctx.phone)
    buffers = tuple(dict.fromkeys(opts["b"])) or logd.DEFAULT
    if "c" in opts["flags"]:
        logs.clear(buffers)
        return 0

    def pick(entries: list[logd.Entry]) -> list[logd.Entry]:
        return [e for e in entries if _shown(e, opts["filters"], "s" in opts["flags"])]

    seen: set[str] = set()
    entries = pick(logs.read(buffers))
    if opts["t"] is not None:
        entries = entries[-opts["t"] :]
    ctx.write(_lines(entries, opts["v"], seen))
    if "d" in opts["flags"] or opts["t"] is not None:
        return 0
    shown = len(logs.read(buffers))
    while ctx.sleep(_FOLLOW_POLL_S):  # follow, until killed or hung up
        now = logs.read(buffers)
        ctx.write(_lines(pick(now[shown:]), opts["v"], seen))
        shown = len(now)
    return 130
