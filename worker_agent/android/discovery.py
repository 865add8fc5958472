"""Phones attached to this host's adb server: their states and facts.

`scan()` reports every phone the server lists, with what is wrong and how to fix it;
`discover()` returns the usable ones as devices for the agent; `present()` says which
registered phones are still attached.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from delegate_runtime.errors import DeviceError

from ..devices import DeviceInfo, host_name
from . import adb, offers
from .facts import UntrustedFacts, clean, device_info, gles_api, parse_getprop, parse_gles

log = logging.getLogger(__name__)

#: Seconds a fact-reading command may take.
FACTS_TIMEOUT_S = 20.0
#: Most bytes a fact-reading command may print (a real getprop or dumpsys prints < 1 MiB).
FACTS_MAX_BYTES = 8 << 20
#: What to do about a phone in each state but `device`.
FIXES = {
    "unauthorized": "accept the USB debugging prompt on the phone (tick 'Always allow from "
    "this computer')",
    "offline": "reconnect the phone (replug the cable, or `adb reconnect offline`); if it "
    "stays offline, restart adb on the phone by toggling USB debugging",
    "no permissions": "give this user access to the USB device (udev rules for the phone's "
    "vendor id, user in the plugdev group)",
    "authorizing": "wait a moment: adb is still checking the phone's key",
    "connecting": "wait a moment: adb is still connecting",
}
#: What to do about a phone whose facts cannot be trusted.
UNTRUSTED_FIX = "check the phone's build (adb shell getprop); it is not served until it changes"


@dataclass
class PhoneStatus:
    """One phone the adb server lists."""

    serial: str
    state: str  #: device, offline, unauthorized, ...
    device: DeviceInfo | None = None  #: filled when the phone is usable
    problem: str = ""
    fix: str = ""

    @property
    def key(self) -> str:
        return f"android:{self.serial}"


def read_facts(client, serial: str, host: str, server: adb.Server) -> DeviceInfo:
    """Ask the phone for its properties and GLES facts."""
    props_raw, late = adb.shell(client, serial, "getprop", FACTS_TIMEOUT_S, FACTS_MAX_BYTES)
    gles_raw, late2 = adb.shell(
        client, serial, "dumpsys SurfaceFlinger", FACTS_TIMEOUT_S, FACTS_MAX_BYTES
    )
    if late or late2:
        raise DeviceError(f"android:{serial} did not answer getprop/dumpsys in time")
    adb.ensure_online(client, serial, "while its facts were read")
    props = parse_getprop(props_raw.decode("utf-8", "replace"))
    gles = parse_gles(gles_raw.decode("utf-8", "replace"))
    sdk = props.get("ro.build.version.sdk", "")
    offered = offers.read(
        _quiet_shell(client, serial), int(sdk) if sdk.isdigit() else None,
        gles_api(gles.get("version", "")),
    )  # fmt: skip
    adb.ensure_online(client, serial, "while its accelerators were read")
    return device_info(serial, props, gles, host, str(server), offered)


def _quiet_shell(client, serial: str) -> offers.Shell:
    """A fixed command's output; "" when it fails or runs late (a fact left unsaid)."""

    def run(line: str) -> str:
        try:
            out, late = adb.shell(client, serial, line, FACTS_TIMEOUT_S, FACTS_MAX_BYTES)
        except DeviceError:
            return ""
        return "" if late else out.decode("utf-8", "replace")

    return run


def scan(host: str | None = None, server: adb.Server | None = None) -> list[PhoneStatus]:
    """Every phone the adb server lists, usable ones with their facts."""
    server = server or adb.Server.from_env()
    host = host or host_name()
    client = adb.client(server)
    try:
        listed = client.list()
    except adb.adb_errors() as exc:
        raise DeviceError(f"the adb server at {server} does not answer: {exc}") from exc
    out = []
    for item in listed:
        status = PhoneStatus(item.serial, item.state)
        if item.state != "device":
            status.problem = f"android:{clean(item.serial, 60)} is {clean(item.state, 40)}"
            status.fix = FIXES.get(item.state, "check the phone and its cable")
        else:
            try:
                status.device = read_facts(client, item.serial, host, server)
            except UntrustedFacts as exc:
                status.problem, status.fix = str(exc), UNTRUSTED_FIX
            except DeviceError as exc:
                status.problem, status.fix = str(exc), FIXES["offline"]
            except Exception as exc:  # noqa: BLE001 - one phone's answers never stop the others
                status.problem = f"android:{clean(item.serial, 60)}: facts unreadable: {exc!r:.200}"
                status.fix = UNTRUSTED_FIX
        out.append(status)
    return out


def discover(host: str | None = None, server: adb.Server | None = None) -> list[DeviceInfo]:
    """The usable phones as devices; the others are logged with their fix."""
    server = server or adb.Server.from_env()
    if not server.up():
        log.info("no adb server at %s: no Android phones", server)
        return []
    found = []
    for status in scan(host, server):
        if status.device is not None:
            found.append(status.device)
        else:
            log.warning("%s: %s", status.problem, status.fix)
    return found


def present(devices: Iterable[DeviceInfo]) -> set[str]:
    """Keys of the given phones still attached and usable (`device` state)."""
    devices = list(devices)
    by_server: dict[str, list[DeviceInfo]] = {}
    for d in devices:
        by_server.setdefault(d.facts.get("adb_server", ""), []).append(d)
    keys: set[str] = set()
    for text, phones in by_server.items():
        server = adb.Server.parse(text)
        if not server.up():
            continue
        try:
            states = {i.serial: i.state for i in adb.client(server).list()}
        except (DeviceError, *adb.adb_errors()):
            continue
        keys |= {d.key for d in phones if states.get(d.facts.get("serial", "")) == "device"}
    return keys
