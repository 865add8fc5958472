"""`devicefarm api`: serve the farm's HTTP API (uvicorn), or manage its users' tokens.

devicefarm api --host 0.0.0.0 --port 8000 --db URL --broker URL --tokens FILE
devicefarm api token add NAME --role admin|submit|read --tokens FILE   (prints the token)
devicefarm api token list|remove ...
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from farm_core.accounts import ENV_TOKENS, ROLES

from . import argtypes, common


def _tokens_file(text: str) -> str:
    """--tokens (an argparse type): a file path in a folder that exists (`token add` never
    creates folders for a path given)."""
    from delegate_runtime.commands._text import printable

    folder = os.path.dirname(text) or "."
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{printable(text)} is a directory; give a file path")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"folder {printable(folder)} does not exist")
    return text


def _add_tokens(p: argparse.ArgumentParser, default: object = None) -> None:
    p.add_argument(
        "--tokens",
        default=default,
        type=_tokens_file,
        metavar="FILE",
        help=f"the users' tokens file (default: ${ENV_TOKENS} or tokens.json in $DEVICEFARM_HOME)",
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "Without an ACTION: serve the API."
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    token = sub.add_parser("token", help="add, list or remove users and their tokens")
    token_sub = token.add_subparsers(dest="token_action", metavar="TOKEN_ACTION", required=True)
    add = token_sub.add_parser("add", help="add a user (or renew their token); prints it once")
    add.add_argument("name", help="the user's name")
    add.add_argument("--role", choices=ROLES, required=True, help="admin, submit or read")
    remove = token_sub.add_parser("remove", help="remove a user (their token stops working)")
    remove.add_argument("name", help="the user's name")
    listing = token_sub.add_parser("list", help="list users and their roles")
    for q in (add, remove, listing):
        _add_tokens(q, argparse.SUPPRESS)  # after the action too; the parent's otherwise
    _add_tokens(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=argtypes.port, default=8000, help="TCP port (default 8000)")
    p.add_argument(
        "--max-model-mb",
        type=argtypes.float_over(0.0),
        default=None,
        help="largest model upload, MiB (default: $DEVICEFARM_MAX_MODEL_MB or 128)",
    )
    p.add_argument(
        "--max-upload-mb",
        type=argtypes.float_over(0.0),
        default=None,
        help="largest request body, MiB (default: the model cap + 1)",
    )
    p.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        default="info",
        help="server log level (default info)",
    )
    common.add_db(p)
    common.add_broker(p)


def tokens_path(args: argparse.Namespace) -> Path:
    from farm_core.accounts import default_tokens_path

    return Path(args.tokens) if args.tokens else default_tokens_path()


def manage_tokens(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from farm_core.accounts import AccountsError, load_accounts, save_accounts

    path = tokens_path(args)
    try:
        accounts = load_accounts(path, missing_ok=args.token_action == "add")
        if args.token_action == "list":
            for user in accounts:
                print(f"{user.name}\t{user.role}")
            return 0
        if args.token_action == "remove":
            save_accounts(accounts.remove(args.name), path)
            print(f"removed {args.name} from {path}", file=sys.stderr)
            return 0
        accounts, token = accounts.add(args.name, args.role)
        save_accounts(accounts, path)
    except AccountsError as exc:
        raise JobError(str(exc)) from exc
    except OSError as exc:
        raise JobError(f"cannot write {path}: {exc.strerror or exc}") from exc
    print(f"user {args.name} ({args.role}) in {path}; its token (shown once):", file=sys.stderr)
    print(token)
    return 0


def _mib(value: float | None) -> int | None:
    return None if value is None else int(value * 1024**2)


def serve(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError
    from farm_core.accounts import AccountsError
    from orchestrator.submit import DEFAULT_MAX_MODEL_MB

    try:
        import uvicorn

        from api.app import FarmApi, make_app
        from api.auth import TokenStore
    except ImportError as exc:
        raise JobError(f"the API needs {exc.name}: pip install 'devicefarm[api]'") from exc
    if args.max_model_mb is not None and args.max_model_mb > DEFAULT_MAX_MODEL_MB:
        raise JobError(f"--max-model-mb must be at most {DEFAULT_MAX_MODEL_MB}")
    path = tokens_path(args)
    try:
        tokens = TokenStore(path)
    except AccountsError as exc:
        hint = " (make one: devicefarm api token add NAME --role ROLE)"
        raise JobError(f"{exc}{hint if not path.exists() else ''}") from exc
    if not len(tokens.accounts()):
        print(f"warning: {path} lists no users: every request will get 401", file=sys.stderr)
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.reach import reach_broker

    broker = common.broker_url(args)
    reach_broker(broker)  # once, at start, as the worker does
    farm = FarmApi(
        common.engine(args),
        CeleryDispatcher(broker),
        tokens,
        _mib(args.max_model_mb),
    )
    app = make_app(farm, _mib(args.max_upload_mb))
    print(f"API on http://{args.host}:{args.port} (users: {path})", file=sys.stderr)
    sys.stderr.flush()
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, server_header=False)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "token":
        return manage_tokens(args)
    return serve(args)
