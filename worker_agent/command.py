"""`devicefarm worker --broker URL --db URL [--devices SPEC,...] [--pin-cpus]
[--group-devices N]`: run this host's agent."""

from __future__ import annotations

import argparse
import signal
import threading


def add_arguments(p: argparse.ArgumentParser) -> None:
    from farm_core import service_urls

    from .discovery import SPEC_HELP, device_specs

    p.add_argument(
        "--broker",
        default=None,
        type=service_urls.broker_url,
        help="broker URL (default: $DEVICEFARM_BROKER or the embedded filesystem broker); "
        "a Redis server is reached once at start: exit 1 when it does not answer",
    )
    p.add_argument(
        "--db",
        default=None,
        type=service_urls.farm_database_url,
        help="the farm's database URL, which must exist (`devicefarm db upgrade` makes one; "
        "default: $DEVICEFARM_DB or the embedded SQLite file)",
    )
    p.add_argument(
        "--devices",
        default="",
        type=device_specs,
        metavar="SPEC,...",
        help=f"serve only these: {SPEC_HELP} (no-op test devices: noop:NAME?delay_s=1); "
        "default: all found",
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
        "--group-devices",
        default=None,
        type=_group_devices,
        metavar="N",
        help="serve no-op devices and phones N to a process (threads, one job at a time per "
        "device) instead of a consumer process each; CPU and OpenCL devices keep their own "
        "(default: $DEVICEFARM_GROUP_DEVICES, else 0: off)",
    )
    p.add_argument(
        "--loglevel",
        default="WARNING",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
        help="the consumers' (Celery's) log level (default WARNING)",
    )


def _group_devices(text: str) -> int:
    from delegate_runtime.errors import UsageError

    from .groups import MAX_GROUP_DEVICES, checked_size

    try:
        return checked_size(int(text))
    except (ValueError, UsageError) as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a whole number from 0 to {MAX_GROUP_DEVICES}"
        ) from exc


def run(args: argparse.Namespace) -> int:
    from farm_core import service_urls
    from farm_core.database import check_worker_connection, is_local_file, open_farm
    from farm_core.reach import reach_broker

    from .agent import Agent
    from .discovery import discover, rediscover_phones
    from .groups import group_devices_default

    group_devices = args.group_devices
    if group_devices is None:
        group_devices = group_devices_default()  # a bad value is refused before any work
    broker_url = args.broker or service_urls.default_broker()
    db_url = args.db or service_urls.default_db()  # a farm that exists
    reach_broker(broker_url)  # once, here: Celery's consumer would retry it forever
    # a server database's schema is `devicefarm db upgrade`'s to change: refused unless current
    open_farm(db_url).dispose()
    if not is_local_file(db_url):
        check_worker_connection(db_url)  # as the consumers will connect, refused here if not
    specs = args.devices
    tags = [t for t in args.tags.split(",") if t.strip()]
    devices = discover(specs, tags)
    if not devices:
        print("no devices found on this host")
        return 1
    phones_wanted = specs is None or any(s.startswith("android") for s in specs)
    agent = Agent(
        db_url,
        broker_url,
        devices,
        name=args.name,
        loglevel=args.loglevel,
        say=lambda m: print(m, flush=True),
        rediscover=(lambda: rediscover_phones(specs, tags)) if phones_wanted else None,
        pin_cpus=args.pin_cpus,
        group_devices=group_devices,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    agent.start(canary=not args.no_canary)
    print(f"agent {agent.name}: serving {', '.join(sorted(agent.devices))}", flush=True)
    for line in agent.describe_cpus():
        print(f"  {line}", flush=True)
    grouped = [d for d in agent.devices.values() if agent.groups.takes(d)]
    if grouped:
        size = agent.groups.size
        print(f"  {len(grouped)} devices served in groups of up to {size} a process", flush=True)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        agent.stop()
    return 0
