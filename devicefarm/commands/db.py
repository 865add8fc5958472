"""`devicefarm db upgrade|current`: migrate the database, or show its revision.

`upgrade` creates a SQLite file that is not there yet (in a folder that exists); `current`
reads one that must be."""

from __future__ import annotations

import argparse
import sys

from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("upgrade", "current"),
        help="upgrade: migrate to the newest schema (creating a SQLite file); current: show "
        "the revision",
    )
    common.add_db(p, existing=False)  # which action reads it is known once all is parsed


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import UsageError
    from farm_core import service_urls
    from farm_core.database import current_revision, make_engine, migrate
    from farm_core.settings import new_home_notice

    reads = args.action == "current"
    problem = args.db and service_urls.database_problem(args.db, existing=reads)
    if problem:
        raise UsageError(f"argument --db: {problem}")
    notice = None if args.db or reads else new_home_notice()
    if notice:
        print(notice, file=sys.stderr)
    engine = make_engine(args.db or service_urls.default_db(existing=reads))
    if args.action == "upgrade":
        migrate(engine)
    rev = current_revision(engine)
    shown = rev or "none (never migrated: run `devicefarm db upgrade`)"
    print(f"{engine.url.render_as_string(hide_password=True)}: revision {shown}")
    return 0
