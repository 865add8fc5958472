"""`devicefarm dashboard [--db URL] [--port P] [--read-only]`: the Streamlit app."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import argtypes, common

#: Environment the app reads (set here for the `streamlit run` child).
ENV_READ_ONLY = "DEVICEFARM_DASHBOARD_READ_ONLY"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_db(p)
    p.add_argument(
        "--port", type=argtypes.port, default=8501, help="TCP port to serve on (default 8501)"
    )
    p.add_argument(
        "--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    p.add_argument(
        "--read-only", action="store_true", help="no campaign submission (default: allowed)"
    )


def command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The `streamlit run` command line and environment for `args`."""
    import dashboard
    from orchestrator.submit import max_model_bytes

    app = Path(dashboard.__file__).parent / "serve.py"
    env = dict(os.environ)
    env["DEVICEFARM_DB"] = common.db_url(args)
    if args.read_only:
        env[ENV_READ_ONLY] = "1"
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.port",
        str(args.port),
        "--server.address",
        args.address,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        # the uploader's limit is the farm's model cap (Streamlit's own default is 200 MB)
        "--server.maxUploadSize",
        str(max(1, max_model_bytes() // 1024**2)),
        # no Deploy button nor developer menu: a lab's users view, they do not deploy
        "--client.toolbarMode",
        "viewer",
    ]
    return argv, env


def run(args: argparse.Namespace) -> int:
    from delegate_runtime.errors import JobError

    try:
        import streamlit  # noqa: F401
    except ImportError as exc:
        raise JobError(
            "the dashboard needs streamlit: pip install 'devicefarm[dashboard]'"
        ) from exc
    # fail early (no farm there, a server schema not upgraded) before serving
    engine = common.engine(args)
    shown = engine.url.render_as_string(hide_password=True)  # password masked
    engine.dispose()
    argv, env = command(args)
    print(f"dashboard on http://{args.address}:{args.port} ({shown})", file=sys.stderr)
    sys.stderr.flush()
    # Streamlit replaces this process: SIGTERM/SIGINT reach it directly (a child was left
    # running when only its parent was signalled)
    os.execve(argv[0], argv, env)
    return 0  # not reached
