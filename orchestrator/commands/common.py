"""Options and helpers shared by the orchestrator's subcommands."""

from __future__ import annotations

import argparse

from sqlalchemy import Engine

from ..settings import ENV_BROKER, ENV_DB, default_broker_url, default_db_url


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", default=None, help=f"database URL (default: ${ENV_DB} or the embedded SQLite file)"
    )


def add_broker(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        default=None,
        help=f"broker URL (default: ${ENV_BROKER} or the embedded filesystem broker)",
    )


def db_url(args: argparse.Namespace) -> str:
    return args.db or default_db_url()


def broker_url(args: argparse.Namespace) -> str:
    return args.broker or default_broker_url()


def engine(args: argparse.Namespace) -> Engine:
    from ..database import open_database

    return open_database(db_url(args))
