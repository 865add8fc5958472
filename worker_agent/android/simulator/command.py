"""`devicefarm adb-sim`: run simulated phones until interrupted.

    devicefarm adb-sim --profile pixel-7 --port 5560
    adb connect 127.0.0.1:5560

`--profile` takes a built-in name or a JSON/YAML file and may be repeated (the phones take
consecutive ports from `--port`; port 0 picks free ones).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from delegate_runtime.commands._flags import int_between

from .profile import BUILTIN


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        action="append",
        metavar="P",
        help=f"built-in ({', '.join(BUILTIN)}) or a .json/.yaml profile; repeatable",
    )
    p.add_argument(
        "--port",
        type=int_between(0, 65535),
        default=0,
        help="TCP port of the first phone (0: free)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: local)")
    p.add_argument("--verbose", action="store_true", help="print every command line received")


def run(args: argparse.Namespace) -> int:
    from .device import SimulatedPhone
    from .profile import load_profile

    profiles = [load_profile(p) for p in (args.profile or ["pixel-7"])]
    phones = []
    stop = threading.Event()
    for i, profile in enumerate(profiles):
        port = args.port + i if args.port else 0
        phone = SimulatedPhone(profile, port=port, host=args.host)
        if args.verbose:
            record = phone.record

            def echo(line: str, _record=record, _phone=phone) -> None:
                print(f"{_phone.serial}$ {line}", flush=True)
                _record(line)

            phone.record = echo  # type: ignore[method-assign]
        phones.append(phone.start())
        print(
            f"adb-sim: {profile.serial} on {phone.serial} (adb connect {phone.serial})", flush=True
        )
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        for phone in phones:
            phone.stop()
    print("adb-sim: stopped", file=sys.stderr)
    return 0
