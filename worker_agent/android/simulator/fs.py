"""The simulated phone's filesystem: in memory, with a capacity (a full disk fails writes)."""

from __future__ import annotations

import posixpath
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: errno names and their messages, as adbd and toybox print them.
ENOENT = "No such file or directory"
ENOTDIR = "Not a directory"
EISDIR = "Is a directory"
EEXIST = "File exists"
ENOSPC = "No space left on device"
EACCES = "Permission denied"


class FsError(Exception):
    """A failed file operation; `str()` is the errno message."""


@dataclass
class Node:
    mode: int  #: st_mode, type bits included
    data: bytearray = field(default_factory=bytearray)
    mtime: int = field(default_factory=lambda: int(time.time()))
    readable: bool = True

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


class FileSystem:
    """Absolute POSIX paths to nodes; `capacity_bytes` bounds the data of all files."""

    def __init__(
        self, capacity_bytes: int | None = None, free_limit: Callable[[], int | None] | None = None
    ):
        self.capacity_bytes = capacity_bytes
        self.free_limit = free_limit  #: a fault: at most this many bytes may still be written
        self.nodes: dict[str, Node] = {"/": Node(stat.S_IFDIR | 0o755)}
        self.lock = threading.RLock()

    @staticmethod
    def norm(path: str) -> str:
        return posixpath.normpath("/" + path.lstrip("/")) if path else "/"

    def used_bytes(self) -> int:
        return sum(len(n.data) for n in self.nodes.values() if not n.is_dir)

    def get(self, path: str) -> Node:
        with self.lock:
            node = self.nodes.get(self.norm(path))
            if node is None:
                raise FsError(ENOENT)
            return node

    def exists(self, path: str) -> bool:
        return self.norm(path) in self.nodes

    def mkdir(self, path: str, parents: bool = False, mode: int = 0o771) -> None:
        path = self.norm(path)
        with self.lock:
            if path in self.nodes:
                if parents and self.nodes[path].is_dir:
                    return
                raise FsError(EEXIST)
            parent = posixpath.dirname(path)
            if parent not in self.nodes:
                if not parents:
                    raise FsError(ENOENT)
                self.mkdir(parent, parents=True, mode=mode)
            if not self.nodes[parent].is_dir:
                raise FsError(ENOTDIR)
            self.nodes[path] = Node(stat.S_IFDIR | mode)

    def write(self, path: str, data: bytes, mode: int = 0o644, mkdirs: bool = False) -> None:
        """Create or replace a file; ENOSPC when the disk cannot hold it."""
        path = self.norm(path)
        with self.lock:
            old = self.nodes.get(path)
            if old is not None and old.is_dir:
                raise FsError(EISDIR)
            if mkdirs:
                self.mkdir(posixpath.dirname(path), parents=True)
            elif posixpath.dirname(path) not in self.nodes:
                raise FsError(ENOENT)
            self.check_space(len(data) - (len(old.data) if old else 0))
            self.nodes[path] = Node(stat.S_IFREG | (mode & 0o7777), bytearray(data))

    def free_bytes(self) -> int | None:
        free = None if self.capacity_bytes is None else self.capacity_bytes - self.used_bytes()
        limit = self.free_limit() if self.free_limit is not None else None
        if limit is not None:
            free = limit if free is None else min(free, limit)
        return free

    def check_space(self, extra_bytes: int) -> None:
        free = self.free_bytes()
        if free is not None and extra_bytes > free:
            raise FsError(ENOSPC)

    def read(self, path: str) -> bytes:
        node = self.get(path)
        if node.is_dir:
            raise FsError(EISDIR)
        if not node.readable:
            raise FsError(EACCES)
        return bytes(node.data)

    def listdir(self, path: str) -> list[str]:
        path = self.norm(path)
        with self.lock:
            node = self.get(path)
            if not node.is_dir:
                raise FsError(ENOTDIR)
            if not node.readable:  # a folder the shell user may not list (r bit off)
                raise FsError(EACCES)
            prefix = path.rstrip("/") + "/"
            return sorted(
                p[len(prefix) :]
                for p in self.nodes
                if p.startswith(prefix) and p != path and "/" not in p[len(prefix) :]
            )

    def remove(self, path: str, recursive: bool = False) -> None:
        path = self.norm(path)
        with self.lock:
            node = self.get(path)
            if node.is_dir:
                if not recursive:
                    raise FsError(EISDIR)
                for p in [p for p in self.nodes if p.startswith(path.rstrip("/") + "/")]:
                    del self.nodes[p]
            if path != "/":
                del self.nodes[path]

    def chmod(self, path: str, mode: int) -> None:
        node = self.get(path)
        node.mode = stat.S_IFMT(node.mode) | (mode & 0o7777)
