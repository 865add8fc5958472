"""Finding this host's devices: OpenCL devices on every platform, the CPU reference, and
(for tests and benchmarks) no-op devices that do no model work.

`--devices` specs choose among them: a kind (`opencl`, `cpu`), a key glob (`opencl:*amd*`),
or `noop:NAME[?delay_s=0.5&error=device&canary=fail&canary_s=4&tags=a+b]` for a no-op device.
A spec that can match nothing whatever is attached (`gpu`, `driver>>1`) is refused as the
command line is parsed (`device_specs`), before any device is looked for.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import platform
import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from urllib.parse import parse_qs

from delegate_runtime.errors import JobError

from .devices import DeviceInfo, canonical, host_name

log = logging.getLogger(__name__)

#: Short vendor names for keys (substring of the OpenCL vendor or platform name -> name).
VENDORS = {
    "nvidia": "nvidia",
    "advanced micro devices": "amd",
    "amd": "amd",
    "intel": "intel",
    "apple": "apple",
    "arm": "arm",
    "qualcomm": "qualcomm",
    "imagination": "imagination",
}
NOOP_OPTIONS = ("delay_s", "error", "canary", "canary_s", "alloc_mb", "tags")
#: The kinds a spec may name alone (a no-op device is named: noop:NAME).
SPEC_KINDS = ("cpu", "opencl", "android")
SPEC_HELP = "a kind (cpu, opencl, android), a key glob ('opencl:*nvidia*') or noop:NAME"
#: What a key glob may hold: a key's characters (kind:name, a phone's serial) and *?[!].
_KEY_GLOB = re.compile(r"^[\w.:@*?\[\]!-]+$")


def vendor_name(platform_name: str, device_vendor: str) -> str:
    """`pocl` for PoCL's devices, else the device vendor's short name."""
    if "portable computing language" in platform_name.lower() or "pocl" in platform_name.lower():
        return "pocl"
    low = device_vendor.lower()
    for needle, short in VENDORS.items():
        if needle in low:
            return short
    return canonical(device_vendor)


def discover_opencl(host: str) -> list[DeviceInfo]:
    """Every OpenCL device on every platform (none when pyopencl or an ICD is missing)."""
    try:
        import pyopencl as cl
    except ImportError:
        return []
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # e.g. PLATFORM_NOT_FOUND_KHR: no ICD installed
        log.warning("no OpenCL platforms: %s", exc)
        return []
    found: list[DeviceInfo] = []
    for pi, p in enumerate(platforms):
        try:
            devices = p.get_devices()
        except cl.Error as exc:
            log.warning("OpenCL platform %r lists no devices: %s", p.name, exc)
            continue
        for di, d in enumerate(devices):
            vendor = vendor_name(p.name, d.vendor)
            base = f"opencl:{vendor}:{canonical(d.name)}"
            n = sum(1 for f in found if f.facts.get("base_key") == base)
            found.append(
                DeviceInfo(
                    # the host is part of the identity: two hosts with one GPU model differ
                    key=(base if n == 0 else f"{base}:{n}") + f":{host}",
                    kind="opencl",
                    vendor=vendor,
                    model=d.name.strip(),
                    renderer=d.name.strip(),
                    driver_version=d.driver_version.strip(),
                    api_version=d.version.strip(),
                    host=host,
                    facts={
                        "base_key": base,
                        "platform": p.name.strip(),
                        "platform_version": p.version.strip(),
                        "device_vendor": d.vendor.strip(),
                        "opencl_spec": f"{pi}:{di}",
                        "device_type": cl.device_type.to_string(d.type),
                        "compute_units": d.max_compute_units,
                        "global_mem_bytes": d.global_mem_size,
                        "extensions": d.extensions.split(),
                    },
                )
            )
    return found


def discover_cpu(host: str) -> DeviceInfo:
    """The host CPU running the numpy reference interpreter."""
    cpu = platform.processor() or platform.machine()
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:  # pragma: no cover - numpy is a core dependency
        numpy_version = ""
    return DeviceInfo(
        key=f"cpu:reference:{host}",
        kind="cpu",
        vendor="reference",
        model=cpu,
        driver_version=f"numpy {numpy_version}",
        host=host,
        facts={"machine": platform.machine(), "python": platform.python_version()},
    )


def noop_device(spec: str, host: str) -> DeviceInfo:
    """A device that does no model work, from `noop:NAME[?options]`."""
    name, _, query = spec.removeprefix("noop:").partition("?")
    if not name:
        raise JobError(f"no-op device spec {spec!r} needs a name: noop:NAME")
    options = {k: v[-1] for k, v in parse_qs(query).items()}
    unknown = set(options) - set(NOOP_OPTIONS)
    if unknown:
        raise JobError(
            f"no-op device {spec!r}: unknown option(s) {', '.join(sorted(unknown))} "
            f"(known: {', '.join(NOOP_OPTIONS)})"
        )
    tags = [t for t in options.pop("tags", "").replace("+", " ").split() if t]
    return DeviceInfo(
        key=f"noop:{canonical(name)}",
        kind="noop",
        vendor="noop",
        model=name,
        host=host,
        tags=tags,
        facts={"noop": options},
    )


def spec_problem(spec: str) -> str | None:
    """Why a `--devices` spec can match no device whatever is attached, or None."""
    if spec.startswith("noop:"):
        try:
            noop_device(spec, "check")
        except JobError as exc:
            return str(exc)
        return None
    if not _KEY_GLOB.match(spec):
        hint = " (selectors such as driver>=535 are submit's)" if re.search("[<>=]", spec) else ""
        return f"{spec!r} is not a device spec: give {SPEC_HELP}{hint}"
    if ":" not in spec and not re.search(r"[*?\[]", spec) and spec not in SPEC_KINDS:
        return f"unknown device kind {spec!r}: give {SPEC_HELP}"
    return None


def device_specs(text: str) -> list[str] | None:
    """`--devices SPEC,...` (an argparse type): the specs, None when none are given (every
    device); one that can match nothing is a usage error, before any device is looked for."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    problems = [p for p in map(spec_problem, specs) if p]
    if problems:
        raise argparse.ArgumentTypeError("; ".join(problems))
    return specs or None


def discover_android(host: str) -> list[DeviceInfo]:
    """Phones over adb, when the android extra (adbutils) is installed."""
    if importlib.util.find_spec("adbutils") is None:
        return []  # phones need `pip install devicefarm[android]`; the other devices don't
    from .android.discovery import discover

    return list(discover(host))


def present(devices: Sequence[DeviceInfo]) -> set[str]:
    """Keys of `devices` still attached: phones are asked over adb; the others always are."""
    keys = {d.key for d in devices if d.kind != "android"}
    phones = [d for d in devices if d.kind == "android"]
    if phones:
        from .android.discovery import present as phones_present

        keys |= phones_present(phones)
    return keys


def is_phone_spec(spec: str) -> bool:
    """`android` or an `android:` key glob: phones may come and go, so matching none yet is
    no error (the agent looks for them again every `rediscover_s`)."""
    return spec == "android" or spec.startswith("android:")


def rediscover_phones(
    specs: Sequence[str] | None = None, tags: Sequence[str] = (), host: str | None = None
) -> list[DeviceInfo]:
    """The phones attached now that `specs` choose (all when None), with `tags`."""
    host = host or host_name()
    wanted = [s.strip() for s in (specs or []) if s.strip()]
    phones = [
        d
        for d in discover_android(host)
        if not wanted or any(d.kind == s or fnmatchcase(d.key, s) for s in wanted)
    ]
    for d in phones:
        d.tags = sorted(set(d.tags) | set(tags))
    return phones


def discover(
    specs: Sequence[str] | None = None, tags: Sequence[str] = (), host: str | None = None
) -> list[DeviceInfo]:
    """This host's devices, chosen by `specs` (all real devices when None)."""
    host = host or host_name()
    wanted = [s.strip() for s in (specs or []) if s.strip()]
    real_needed = not wanted or any(not s.startswith("noop:") for s in wanted)
    real = []
    if real_needed:
        real = [discover_cpu(host), *discover_opencl(host), *discover_android(host)]
    chosen: dict[str, DeviceInfo] = {}
    errors = []
    if not wanted:
        chosen = {d.key: d for d in real}
    for spec in wanted:
        if spec.startswith("noop:"):
            d = noop_device(spec, host)
            chosen[d.key] = d
            continue
        hits = [d for d in real if d.kind == spec or fnmatchcase(d.key, spec)]
        if not hits and is_phone_spec(spec):
            log.warning("--devices %r matches no phone yet; looking again periodically", spec)
        elif not hits:
            errors.append(
                f"--devices {spec!r} matches no device on this host "
                f"(found: {', '.join(d.key for d in real) or 'none'})"
            )
        chosen.update((d.key, d) for d in hits)
    if errors:
        raise JobError("; ".join(errors))
    for d in chosen.values():
        d.tags = sorted(set(d.tags) | set(tags))
    return list(chosen.values())
