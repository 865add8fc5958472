"""The compiled-program cache: private directory, atomic writes, untrusted entries rebuilt."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from delegate_runtime.gpu.opencl import cache as cache_mod
from delegate_runtime.gpu.opencl.cache import (
    CacheKey,
    KernelCache,
    ensure_private_dir,
    point_driver_cache,
)

KEY = CacheKey(
    token="0123abcd" * 8,
    device="pthread-AMD EPYC",
    driver="3.0-rc2",
    options="-cl-mad-enable -DSTORAGE_HALF",
    source_sha256="f" * 64,
)
BINARY = bytes(range(256)) * 40


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def cache(tmp_path: Path) -> KernelCache:
    return KernelCache(tmp_path / "a" / "b" / "kernels")


def test_directory_is_created_private(tmp_path):
    c = KernelCache(tmp_path / "new" / "kernels")
    assert c.dir.is_dir() and mode(c.dir) == 0o700


def test_existing_wide_directory_is_tightened(tmp_path):
    d = tmp_path / "wide"
    d.mkdir(mode=0o777)
    os.chmod(d, 0o777)
    ensure_private_dir(d)
    assert mode(d) == 0o700


def test_round_trip_and_file_name(cache):
    path = cache.store(KEY, BINARY)
    assert path == cache.dir / f"{KEY.token}_{KEY.fingerprint()}.bin"
    assert cache.load(KEY) == BINARY
    assert cache.rejected == 0


def test_missing_entry_is_none_not_a_rejection(cache):
    assert cache.load(KEY) is None and cache.rejected == 0


def test_store_leaves_no_temporary_files(cache):
    cache.store(KEY, BINARY)
    cache.store(KEY, BINARY[:100])  # overwrite
    assert sorted(p.name for p in cache.dir.iterdir()) == [cache.path(KEY).name]
    assert cache.load(KEY) == BINARY[:100]


def test_failed_write_keeps_the_old_entry_and_no_partial_file(cache, monkeypatch):
    cache.store(KEY, BINARY)

    def fail(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(cache_mod.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        cache.store(KEY, b"new" * 1000)
    assert sorted(p.name for p in cache.dir.iterdir()) == [cache.path(KEY).name]
    monkeypatch.undo()
    assert cache.load(KEY) == BINARY


def test_write_goes_through_a_temporary_file_in_the_same_directory(cache, monkeypatch):
    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append((Path(src), Path(dst)))
        assert Path(src).read_bytes().endswith(BINARY)  # complete before the rename
        real(src, dst)

    monkeypatch.setattr(cache_mod.os, "replace", spy)
    cache.store(KEY, BINARY)
    ((src, dst),) = seen
    assert src.parent == dst.parent == cache.dir and src != dst


def _damage(path: Path, how: str) -> None:
    raw = bytearray(path.read_bytes())
    if how == "corrupt":
        raw[-100] ^= 0xFF
    elif how == "truncated":
        raw = raw[: len(raw) // 2]
    elif how == "header-truncated":
        raw = raw[:10]
    elif how == "foreign":
        raw = bytearray(b"\x7fELF" + bytes(2000))
    elif how == "empty":
        raw = bytearray()
    elif how == "bad-header":
        raw[8:12] = b"{{{{"
    elif how == "huge-header-length":
        raw[4:8] = (2**31).to_bytes(4, "little")
    elif how == "appended":
        raw += b"extra"
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    "how",
    [
        "corrupt",
        "truncated",
        "header-truncated",
        "foreign",
        "empty",
        "bad-header",
        "huge-header-length",
        "appended",
    ],
)
def test_damaged_entries_are_rejected_and_removed(cache, how):
    path = cache.store(KEY, BINARY)
    _damage(path, how)
    assert cache.load(KEY) is None
    assert not path.exists() and cache.rejected == 1
    cache.store(KEY, BINARY)  # rebuilt
    assert cache.load(KEY) == BINARY


def test_entry_of_another_key_is_rejected(cache):
    other = replace(KEY, driver="3.1")
    cache.store(other, BINARY)
    cache.path(other).rename(cache.path(KEY))  # a foreign entry under our name
    assert cache.load(KEY) is None
    assert not cache.path(KEY).exists() and cache.rejected == 1


def test_entry_of_another_format_version_is_rejected(cache, monkeypatch):
    monkeypatch.setattr(cache_mod, "CACHE_FORMAT_VERSION", 999)
    fp_other = KEY.fingerprint()
    path = cache.store(KEY, BINARY)
    monkeypatch.undo()
    assert KEY.fingerprint() != fp_other  # the version is part of the key too
    path.rename(cache.path(KEY))
    assert cache.load(KEY) is None and cache.rejected == 1


def test_oversized_entry_is_rejected_before_reading(cache, monkeypatch):
    path = cache.store(KEY, BINARY)
    monkeypatch.setattr(cache_mod, "MAX_ENTRY_BYTES", 1000)
    assert cache.load(KEY) is None
    assert not path.exists() and cache.rejected == 1


@pytest.mark.parametrize(
    "field,value",
    [
        ("token", "another-model"),
        ("device", "NVIDIA H200"),
        ("driver", "550.54"),
        ("options", "-cl-mad-enable"),
        ("source_sha256", "0" * 64),
    ],
)
def test_key_changes_with_every_field(field, value):
    other = replace(KEY, **{field: value})
    assert other.fingerprint() != KEY.fingerprint()
    assert other.file_name() != KEY.file_name()


def test_fingerprint_is_stable():
    assert KEY.fingerprint() == replace(KEY).fingerprint()
    assert len(KEY.fingerprint()) == 32


@pytest.mark.parametrize("token", ["../../etc/passwd", "a/b", "x" * 500, "sp ace"])
def test_tokens_cannot_escape_the_directory(cache, token):
    key = replace(KEY, token=token)
    path = cache.store(key, BINARY)
    assert path.parent == cache.dir
    assert "/" not in key.file_name() and len(key.file_name()) <= 64 + 1 + 32 + 4
    assert cache.load(key) == BINARY


def test_driver_caches_are_pointed_inside_ours(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_CACHE_PATH", raising=False)
    monkeypatch.delenv("POCL_CACHE_DIR", raising=False)
    point_driver_cache(tmp_path / "kc")
    nvidia = Path(os.environ["CUDA_CACHE_PATH"])
    pocl = Path(os.environ["POCL_CACHE_DIR"])
    assert nvidia == tmp_path / "kc" / "driver" and mode(nvidia) == 0o700
    assert pocl == tmp_path / "kc" / "pocl" and mode(pocl) == 0o700


def test_users_driver_caches_are_respected(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CACHE_PATH", "/somewhere/else")
    monkeypatch.setenv("POCL_CACHE_DIR", "/somewhere/pocl")
    point_driver_cache(tmp_path / "kc")
    assert os.environ["CUDA_CACHE_PATH"] == "/somewhere/else"
    assert os.environ["POCL_CACHE_DIR"] == "/somewhere/pocl"
    assert not (tmp_path / "kc").exists()


def _aged(cache: KernelCache, n: int, size: int, age: int) -> CacheKey:
    """An entry of `size` bytes for a key of its own, last used `age` seconds after 1e6."""
    key = replace(KEY, source_sha256=f"{n:064x}")
    cache.store(key, bytes(size))
    os.utime(cache.path(key), (1_000_000 + age, 1_000_000 + age))
    return key


def test_the_entries_keep_within_their_bound_the_least_recently_used_going_first(cache):
    from delegate_runtime.gpu.opencl import grid_record

    keys = [_aged(cache, n, 1000, age=n) for n in range(4)]
    grid_record.remember(str(cache.path(keys[0])), "persistent0_0", 132)
    assert cache.load(keys[0]) == bytes(1000)  # read: used last now
    entry_bytes = cache.path(keys[0]).stat().st_size
    assert cache_mod.prune(cache.dir, 2 * entry_bytes) == 2
    assert [cache.holds(k) for k in keys] == [True, False, False, True]
    assert grid_record.held(str(cache.path(keys[0])), "persistent0_0") == 132  # kept with it


def test_an_entry_s_sidecars_go_with_it(cache):
    from delegate_runtime.gpu.opencl import grid_record

    old, new = _aged(cache, 0, 1000, age=0), _aged(cache, 1, 1000, age=1)
    for key in (old, new):
        grid_record.remember(str(cache.path(key)), "persistent0_0", 66)
    cache.path(new).write_bytes(b"torn")  # rejected when read: its record goes too
    assert cache.load(new) is None
    assert not Path(f"{cache.path(new)}.grids").exists()
    assert cache_mod.prune(cache.dir, 1) == 1  # nothing fits: the old entry and its record
    assert list(cache.dir.iterdir()) == []


def test_the_bound_is_read_from_the_environment(monkeypatch):
    assert cache_mod.bound_bytes() == 4 * 1024**3
    monkeypatch.setenv(cache_mod.ENV_BOUND, str(1 << 30))
    assert cache_mod.bound_bytes() == 1 << 30


@pytest.mark.parametrize("bad", ["4GB", "1000"])  # not a number; under a MiB
def test_a_bad_bound_is_refused_by_name(monkeypatch, bad):
    from delegate_runtime.errors import UsageError

    monkeypatch.setenv(cache_mod.ENV_BOUND, bad)
    with pytest.raises(UsageError, match="DEVICEFARM_KERNEL_CACHE_BYTES"):
        cache_mod.bound_bytes()
