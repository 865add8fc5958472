"""A simulated phone: a TCP listener speaking adbd's transport, its filesystem and state."""

from __future__ import annotations

import contextlib
import logging
import socket
import stat
import threading
from collections.abc import Callable

from .fs import FileSystem
from .profile import Profile, load_profile
from .protocol import banner
from .shell import Process, shell_service
from .sync import sync_service
from .transport import Connection, Stream

log = logging.getLogger(__name__)

#: Features in the CNXN banner: only what this simulator implements (no shell_v2, no
#: stat_v2/ls_v2); SEND creates missing parent directories, as fixed_push_mkdir promises.
FEATURES = ["fixed_push_mkdir"]
WORK_DIR = "/data/local/tmp"
THERMAL_DIR = "/sys/class/thermal"
CPU_DIR = "/sys/devices/system/cpu"
VENDOR_LIB = "/vendor/lib64"
#: Where a device lists its HALs (an NNAPI device is an `IDevice/<name>` instance).
VINTF_MANIFEST = "/vendor/etc/vintf/manifest.xml"
#: NNAPI's own CPU implementation: in the framework, never a HAL instance.
NNAPI_REFERENCE = "nnapi-reference"


class SimulatedPhone:
    """A phone on 127.0.0.1:`port` (0: a free port); `start()` to plug it in."""

    def __init__(self, profile: Profile | str | dict, port: int = 0, host: str = "127.0.0.1"):
        self.profile = profile if isinstance(profile, Profile) else load_profile(profile)
        self.host = host
        self.port = port
        self.fs = FileSystem(self.profile.disk_bytes, lambda: self.profile.faults.disk_free_bytes)
        self.commands: list[str] = []  #: every shell command line received, in order
        self.sync_requests: list[tuple[str, str]] = []  #: (request id, path) received
        self.violations: list[str] = []  #: lines refused for their shell syntax
        self.processes: list[Process] = []
        self.lock = threading.RLock()
        self.connections: list[Connection] = []
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._populate()

    # -- identity -------------------------------------------------------------------

    @property
    def serial(self) -> str:
        """The name the adb server gives this phone (`adb connect` uses host:port)."""
        return f"{self.host}:{self.port}"

    def props(self) -> dict[str, str]:
        return dict(self.profile.props)

    def banner(self) -> bytes:
        return banner(self.props(), FEATURES)

    def authorized(self) -> bool:
        return not self.profile.faults.unauthorized

    def responds(self) -> bool:
        return not self.profile.faults.offline

    def service(self, name: str) -> Callable[[Stream], None] | None:
        if name.startswith("shell:"):
            return shell_service(self, name.removeprefix("shell:"))
        if name == "sync:":
            return sync_service(self)
        return None

    # -- recording ------------------------------------------------------------------

    def record(self, line: str) -> None:
        with self.lock:
            self.commands.append(line)

    def record_sync(self, request: str, path: str) -> None:
        with self.lock:
            self.sync_requests.append((request, path))

    # -- the filesystem a phone starts with -----------------------------------------

    def _populate(self) -> None:
        fs, p = self.fs, self.profile
        fs.capacity_bytes = None  # sysfs and friends do not take disk space
        free_limit, fs.free_limit = fs.free_limit, None  # nor the system's own files
        fs.mkdir(WORK_DIR, parents=True)
        for i, (kind, milli_c) in enumerate(p.thermal.items()):
            fs.write(f"{THERMAL_DIR}/thermal_zone{i}/type", f"{kind}\n".encode(), mkdirs=True)
            fs.write(f"{THERMAL_DIR}/thermal_zone{i}/temp", f"{milli_c}\n".encode())
        for i, khz in enumerate(p.cpu_khz):
            path = f"{CPU_DIR}/cpu{i}/cpufreq/scaling_cur_freq"
            fs.write(path, f"{khz}\n".encode(), mkdirs=True)
        if p.cpu_khz:
            fs.write(f"{CPU_DIR}/online", f"0-{len(p.cpu_khz) - 1}\n".encode())
        gpu = p.gpu or {}
        if gpu.get("kind") == "mali":
            fs.write(f"{gpu['path']}/cur_freq", f"{gpu.get('hz', 0)}\n".encode(), mkdirs=True)
        elif gpu.get("kind") == "kgsl":
            fs.write(f"{gpu['path']}/gpuclk", f"{gpu.get('hz', 0)}\n".encode(), mkdirs=True)
            devfreq = f"{gpu['path']}/devfreq/cur_freq"
            fs.write(devfreq, f"{gpu.get('hz', 0)}\n".encode(), mkdirs=True)
        self._populate_accelerators()
        fs.capacity_bytes = p.disk_bytes
        fs.free_limit = free_limit
        fs.get(WORK_DIR).mode = stat.S_IFDIR | 0o771

    def _populate_accelerators(self) -> None:
        """The files a real phone has for its accelerators: the OpenCL library, the HAL
        manifest naming its NNAPI devices, the Hexagon libraries, each CPU's top clock."""
        fs, p = self.fs, self.profile
        for i, khz in enumerate(p.cpu_max_khz):
            path = f"{CPU_DIR}/cpu{i}/cpufreq/cpuinfo_max_freq"
            fs.write(path, f"{khz}\n".encode(), mkdirs=True)
        fs.write(f"{VENDOR_LIB}/libEGL_{p.props.get('ro.hardware.egl', 'gpu')}.so", b"\x7fELF",
                 mkdirs=True)  # fmt: skip
        if p.opencl_lib:
            fs.write(f"{VENDOR_LIB}/{p.opencl_lib}", b"\x7fELF", mkdirs=True)
        fs.write(VINTF_MANIFEST, _manifest([n for n in p.nnapi if n != NNAPI_REFERENCE]),
                 mkdirs=True)  # fmt: skip
        if p.hexagon:
            fs.write(f"{p.hexagon['interface']}/libhexagon_interface.so", b"\x7fELF", mkdirs=True)
            for skel in ("libhexagon_nn_skel.so", "libhexagon_nn_skel_v65.so",
                         "libhexagon_nn_skel_v66.so"):  # fmt: skip
                fs.write(f"{p.hexagon['skel_dir']}/{skel}", b"\x7fELF", mkdirs=True)

    # -- plugging in and out ----------------------------------------------------------

    def start(self) -> SimulatedPhone:
        """Listen on host:port (port 0 picks a free one, kept for later restarts)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(8)
        self.port = sock.getsockname()[1]
        self._listener = sock
        self._thread = threading.Thread(target=self._accept, args=(sock,), daemon=True,
                                        name=f"adb-sim:{self.port}")  # fmt: skip
        self._thread.start()
        return self

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                client, _ = sock.accept()
            except OSError:
                return  # the listener was closed
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(client, self)
            with self.lock:
                self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        try:
            conn.serve()
        finally:
            with self.lock:
                if conn in self.connections:
                    self.connections.remove(conn)

    def stop(self) -> None:
        """Unplug: stop listening and cut every connection (running programs are killed)."""
        if self._listener is not None:
            # NOTE: close() alone does not wake a thread blocked in accept() on Linux;
            # shutdown() does (and the port stops taking connections at once).
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
        with self.lock:
            conns = list(self.connections)
            for proc in self.processes:
                proc.killed.set()
        for conn in conns:
            conn.drop()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def drop_later(self, delay_s: float) -> None:
        """The phone vanishes `delay_s` from now (the cable is pulled mid-run)."""
        timer = threading.Timer(delay_s, self.stop)
        timer.daemon = True
        timer.start()

    def __enter__(self) -> SimulatedPhone:
        return self.start() if self._listener is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _manifest(nnapi: list[str]) -> bytes:
    """A VINTF manifest with the NNAPI HAL's instances (AIDL, as Android 12+ declares it)."""
    instances = "".join(f"        <fqname>IDevice/{n}</fqname>\n" for n in nnapi)
    hal = (
        '    <hal format="aidl">\n        <name>android.hardware.neuralnetworks</name>\n'
        f"        <version>1</version>\n{instances}    </hal>\n"
        if nnapi
        else ""
    )
    return f'<manifest version="2.0" type="device">\n{hal}</manifest>\n'.encode()
