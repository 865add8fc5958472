"""`devicefarm db upgrade|current`: migrate the database, or show its revision."""

from __future__ import annotations

import argparse

from . import common


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("upgrade", "current"))
    common.add_db(p)


def run(args: argparse.Namespace) -> int:
    from sqlalchemy import text

    from ..database import make_engine, migrate

    engine = make_engine(common.db_url(args))
    if args.action == "upgrade":
        migrate(engine)
    with engine.begin() as conn:
        rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    print(f"{engine.url.render_as_string(hide_password=True)}: revision {rev}")
    return 0
