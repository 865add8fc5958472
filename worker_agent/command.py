"""`devicefarm worker --broker URL --db URL [--devices SPEC,...] [--pin-cpus]`: run this
host's agent."""

from __future__ import annotations

import argparse
import signal
import threading


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        default=None,
        help="broker URL (default: $DEVICEFARM_BROKER or the embedded filesystem broker)",
    )
    p.add_argument(
        "--db",
        default=None,
        help="database URL (default: $DEVICEFARM_DB or the embedded SQLite file)",
    )
    p.add_argument(
        "--devices",
        default="",
        metavar="SPEC,...",
        help="serve only these: kinds (opencl, cpu), key globs ('opencl:*nvidia*'), "
        "or no-op test devices (noop:NAME?delay_s=1); default: all found",
    )
    p.add_argument(
        "--tags", default="", help="comma-separated tags for every device (default: none)"
    )
    p.add_argument("--name", default="", help="agent name (default host:pid)")
    p.add_argument("--no-canary", action="store_true", help="skip the start-up health check")
    p.add_argument(
        "--pin-cpus",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run each device's consumer on CPUs of its own: the CPU reference a core, the "
        "GPUs the rest split evenly (default: $DEVICEFARM_PIN_CPUS, else off: the consumers "
        "share the CPUs, GPU input-copy helpers within a budget)",
    )
    p.add_argument(
        "--loglevel",
        default="WARNING",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="the consumers' (Celery's) log level (default WARNING)",
    )


def run(args: argparse.Namespace) -> int:
    from farm_core.database import open_farm
    from farm_core.settings import default_broker_url, default_db_url

    from .agent import Agent
    from .discovery import discover, rediscover_phones

    # a server database's schema is `devicefarm db upgrade`'s to change: refused unless current
    open_farm(args.db or default_db_url()).dispose()
    specs = [s for s in args.devices.split(",") if s.strip()] or None
    tags = [t for t in args.tags.split(",") if t.strip()]
    devices = discover(specs, tags)
    if not devices:
        print("no devices found on this host")
        return 1
    phones_wanted = specs is None or any(s.startswith("android") for s in specs)
    agent = Agent(
        args.db or default_db_url(),
        args.broker or default_broker_url(),
        devices,
        name=args.name,
        loglevel=args.loglevel,
        say=lambda m: print(m, flush=True),
        rediscover=(lambda: rediscover_phones(specs, tags)) if phones_wanted else None,
        pin_cpus=args.pin_cpus,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    agent.start(canary=not args.no_canary)
    print(f"agent {agent.name}: serving {', '.join(sorted(agent.devices))}", flush=True)
    for line in agent.describe_cpus():
        print(f"  {line}", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        agent.stop()
    return 0
