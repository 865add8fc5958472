"""The farm's service URLs checked before any work: `--db`, `--broker`, and what stands for
them ($DEVICEFARM_DB, $DEVICEFARM_BROKER, the embedded farm under $DEVICEFARM_HOME).

A database URL needs a dialect SQLAlchemy knows. Only the commands that start a farm
(`devicefarm run`, `devicefarm db upgrade`) create a SQLite file, and only in a folder that
exists; every other command reads a farm that must be there, so a typo is an error, not a
new empty farm. A broker URL needs a transport the farm configures (BROKER_TRANSPORTS). As
argparse types a bad value is a usage error (exit 2, one line naming the argument); for the
environment's values, a UsageError (also exit 2) naming the variable.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from delegate_runtime.errors import UsageError

from .settings import (
    BROKER_TRANSPORTS,
    ENV_BROKER,
    ENV_DB,
    ENV_HOME,
    default_broker_url,
    default_db_url,
)

#: The first bytes of every SQLite database file (an empty file is an empty database).
SQLITE_MAGIC = b"SQLite format 3\x00"
#: Where a farm comes from, for a missing SQLite file's message.
CREATES_A_FARM = "`devicefarm run` or `devicefarm db upgrade --db URL` creates one"
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@/]*@")


def shown(url: str) -> str:
    """`url` with its password masked, for messages."""
    return _PASSWORD.sub(r"\1***@", url)


def database_problem(url: str, existing: bool) -> str | None:
    """Why `url` cannot be the farm's database, or None. `existing`: a SQLite file must be
    there already (a command reading a farm); else its folder must be (one creating it)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"bad database URL {shown(url)!r}: {why} (sqlite:///FILE or postgresql://...)"
    if parsed.get_backend_name() != "sqlite":
        return None  # a server: reached when opened, within CONNECT_TIMEOUT_S
    name = parsed.database or ""
    if name in ("", ":memory:"):
        return "an in-memory SQLite database holds no farm" if existing else None
    if name.startswith("file:"):
        return None  # a URI filename (?uri=true): SQLite reads its options
    return _sqlite_file_problem(Path(name), existing)


def _sqlite_file_problem(path: Path, existing: bool) -> str | None:
    if path.is_dir():
        return f"{path} is a directory, not a SQLite database file"
    if not path.exists():
        if existing:
            return f"no farm database {path} ({CREATES_A_FARM})"
        folder = path.absolute().parent
        if not folder.is_dir():
            return f"cannot create {path}: folder {folder} does not exist"
        return None
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if head and head != SQLITE_MAGIC:
        return f"{path} is not a SQLite database"
    return None


def broker_problem(url: str) -> str | None:
    """Why `url` cannot be the farm's broker, or None."""
    scheme, sep, rest = url.partition("://")
    example = "redis://HOST:6379/0 or filesystem://FOLDER"
    if not sep or not scheme:
        return f"bad broker URL {shown(url)!r}: expected SCHEME://... ({example})"
    transport = scheme.split("+", 1)[0]
    if transport not in BROKER_TRANSPORTS:
        return (
            f"bad broker URL {shown(url)!r}: no transport for {scheme!r} "
            f"(the farm's: {', '.join(BROKER_TRANSPORTS)})"
        )
    if transport == "filesystem":
        folder = Path(rest or ".")
        if folder.exists() and not folder.is_dir():
            return f"bad broker URL {shown(url)!r}: {folder} is not a folder"
        if not folder.exists() and not folder.absolute().parent.is_dir():
            return (
                f"bad broker URL {shown(url)!r}: folder {folder.absolute().parent} does not exist"
            )
        return None
    if scheme == transport:  # redis://, rediss:// (redis+socket:// names a socket file)
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError as exc:
            return f"bad broker URL {shown(url)!r}: {exc}"
        if not parts.hostname:
            return f"bad broker URL {shown(url)!r}: no host ({example})"
    return None


def _type(problem_of: Callable[[str], str | None], name: str) -> Callable[[str], str]:
    """An argparse type that refuses a value `problem_of` finds a problem with."""

    def parse(text: str) -> str:
        problem = problem_of(text)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text

    parse.__name__ = name
    return parse


#: argparse types: a database a command creates if missing (run, db upgrade), the farm's
#: database a command reads (must exist), and a broker.
database_url = _type(lambda url: database_problem(url, existing=False), "database URL")
farm_database_url = _type(lambda url: database_problem(url, existing=True), "database URL")
broker_url = _type(broker_problem, "broker URL")


def default_db(existing: bool = True) -> str:
    """$DEVICEFARM_DB or the embedded farm's SQLite file; UsageError when it cannot be used
    (with `existing`: when there is no farm yet)."""
    url = default_db_url()
    if os.environ.get(ENV_DB):
        problem = database_problem(url, existing)
        if problem:
            raise UsageError(f"${ENV_DB}: {problem}")
        return url
    path = Path(url.removeprefix("sqlite:///"))  # home() is absolute
    if existing and not path.exists():
        raise UsageError(
            f"no farm in {path.parent} (the farm's home: --home DIR, ${ENV_HOME} or the "
            "user's data directory): `devicefarm run` or `devicefarm db upgrade` creates one; "
            "or give --db"
        )
    return url


def default_broker() -> str:
    """$DEVICEFARM_BROKER or the embedded farm's filesystem broker; UsageError when bad."""
    url = default_broker_url()
    problem = broker_problem(url) if os.environ.get(ENV_BROKER) else None
    if problem:
        raise UsageError(f"${ENV_BROKER}: {problem}")
    return url
