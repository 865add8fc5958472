"""The `devicefarm` console command: one entry point, subcommands from every package.

Each subcommand lives in its own module with `add_arguments(parser)` and `run(args) -> int`;
modules are imported only when their subcommand runs (or to build its --help), so the
command starts fast and each role needs only its own extras installed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# NOTE: the CPU reference is single-threaded by definition, and a multi-threaded BLAS on a
# busy lab host is up to 10x slower than one thread; set before numpy is first imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "invoke": ("delegate_runtime.commands.invoke", "run a model once on inputs from an .npz file"),
    "inspect": ("delegate_runtime.commands.inspect", "show a model's subgraphs, tensors and ops"),
    "ops": ("delegate_runtime.commands.ops", "list the ops and versions the runtime supports"),
    "example": ("delegate_runtime.commands.example", "write a small example model to try the farm"),
    "build-pool": (
        "delegate_runtime.commands.build_pool",
        "keep resident GPU program builders, for fast cold starts",
    ),
    "run": ("devicefarm.commands.run", "run models on this machine's devices, no server"),
    "submit": ("devicefarm.commands.submit", "submit a campaign of jobs to the farm"),
    "status": ("devicefarm.commands.status", "show campaigns and their jobs by state"),
    "results": ("devicefarm.commands.results", "show a campaign's results"),
    "devices": ("devicefarm.commands.devices", "list registered devices and their health"),
    "cancel": ("devicefarm.commands.cancel", "cancel a campaign's unfinished jobs"),
    "rerun": ("devicefarm.commands.rerun", "re-run a campaign's failed or timed-out jobs"),
    "worker": ("worker_agent.command", "run this host's worker agent"),
    "adb-sim": ("worker_agent.android.simulator.command", "run simulated Android phones (adbd)"),
    "reconcile": ("devicefarm.commands.reconcile", "re-send lost jobs, expire stuck ones"),
    "db": ("devicefarm.commands.db", "migrate the farm database or show its revision"),
    "projects": ("devicefarm.commands.projects", "add projects, set and show their quotas"),
    "reserve": ("devicefarm.commands.reserve", "hold a device for a time window"),
    "reservations": ("devicefarm.commands.reservations", "list or cancel device reservations"),
    "benchmark": (
        "delegate_runtime.commands.benchmark",
        "benchmark a model as TFLite's benchmark_model does",
    ),
    "diff": (
        "delegate_runtime.commands.diff",
        "inference diff: a delegate's outputs against the CPU reference",
    ),
    "accuracy": (
        "delegate_runtime.commands.accuracy",
        "task accuracy: image classification top-K, detection mAP",
    ),
    "allowlist": ("devicefarm.commands.allowlist", "export a model's allowlist, per delegate"),
    "dashboard": ("devicefarm.commands.dashboard", "serve the Streamlit dashboard"),
    "api": ("devicefarm.commands.api", "serve the farm's HTTP API, or manage its users' tokens"),
    "make-dataset": (
        "delegate_runtime.commands.make_dataset",
        "write a small labelled synthetic dataset (and a model for it)",
    ),
}

#: Runs the commands that have an `--api URL` form against a farm's HTTP API.
REMOTE = "devicefarm.commands.remote"
#: The subcommands that read or make the embedded farm's state: they take --home too.
FARM_STATE = (
    *("run", "submit", "status", "results", "devices", "cancel", "rerun", "worker"),
    *("reconcile", "db", "allowlist", "dashboard", "api"),
    *("projects", "reserve", "reservations"),
)
HOME_HELP = (
    "the embedded farm's folder (default: $DEVICEFARM_HOME, else the user's data directory, "
    "~/.local/share/devicefarm on Linux)"
)


def subcommand_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv`: its first word that is not an option or --home's value."""
    after_home = False
    for arg in argv:
        if after_home:
            after_home = False
        elif arg == "--home":
            after_home = True
        elif not arg.startswith("-"):
            return arg
    return None


def _use_home(folder: str) -> None:
    """Point this process (and the processes it starts) at the farm in `folder`."""
    from delegate_runtime.errors import UsageError
    from farm_core.settings import ENV_HOME

    path = os.path.abspath(os.path.expanduser(folder))
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"argument --home: {path} is not a folder")
    os.environ[ENV_HOME] = path


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devicefarm",
        description="Device-farm test harness for GPU-delegated TensorFlow Lite (LiteRT) models.",
    )
    parser.add_argument("--home", metavar="DIR", help=HOME_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = subcommand_of(argv)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name in FARM_STATE:  # SUPPRESS: an absent one keeps the top level's value
            p.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS, help=HOME_HELP)
        if name == wanted:  # only the chosen subcommand's module is imported
            importlib.import_module(module).add_arguments(p)
            p.set_defaults(_module=module)
            importlib.import_module(REMOTE).add_api_option(name, p)  # --api URL
            parser.set_defaults(_parser=p)
    return parser


def unknown_arguments(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """argparse's message for arguments `parser` does not take, with the option meant where
    one is close (`--num-runs`: did you mean --num_runs?; TFLite's tools spell flags with
    `_`, the farm's commands with `-`)."""
    import difflib

    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    plain = {o.replace("_", "-"): o for o in options}
    hints = []
    for word in extra:
        name = word.split("=", 1)[0]
        if not name.startswith("--"):
            continue
        close = plain.get(name.replace("_", "-")) or next(
            iter(difflib.get_close_matches(name, options, n=1, cutoff=0.75)), None
        )
        if close:
            hints.append(f"{name}: did you mean {close}?")
    message = f"unrecognized arguments: {' '.join(extra)}"
    return message + (f" ({'; '.join(hints)})" if hints else "")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand: its exit code; 2 for a usage error (argparse's, or a UsageError:
    a farm or setting that cannot be used), 1 for what the farm refuses (one line)."""
    from delegate_runtime.errors import DevicefarmError, UsageError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if extra:  # the subcommand's usage and the option meant, not the top level's usage
        chosen = getattr(args, "_parser", parser)
        chosen.error(unknown_arguments(chosen, extra))
    if not getattr(args, "_module", None):
        parser.print_help()
        return 2
    try:
        if args.home is not None:
            _use_home(args.home)
        module = importlib.import_module(REMOTE).route(args)  # the API's client, or local
        return int(importlib.import_module(module).run(args) or 0)
    except DevicefarmError as exc:
        # names read from models may hold control bytes
        from delegate_runtime.printable import printable

        message = printable(exc, keep="\n")
        if isinstance(exc, UsageError):  # worded as argparse words its own
            print(f"devicefarm {args.command}: error: {message}", file=sys.stderr)
            return 2
        print(f"devicefarm {args.command}: error: {type(exc).__name__}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` or `grep -q`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
