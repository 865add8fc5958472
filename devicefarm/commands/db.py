"""`devicefarm db upgrade|current`: migrate the database, or show its revision."""

from __future__ import annotations

import argparse

from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("upgrade", "current"),
        help="upgrade: migrate to the newest schema; current: show the revision",
    )
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from farm_core.database import current_revision, make_engine, migrate

    engine = make_engine(common.db_url(args))
    if args.action == "upgrade":
        migrate(engine)
    rev = current_revision(engine)
    shown = rev or "none (never migrated: run `devicefarm db upgrade`)"
    print(f"{engine.url.render_as_string(hide_password=True)}: revision {shown}")
    return 0
