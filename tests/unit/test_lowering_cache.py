"""The lowering's entries in the kernel cache: keyed by every input and the code, read back
whole, and an entry that does not load removed."""

from __future__ import annotations

import pickle

import pytest

from delegate_runtime.gpu.opencl import lowering_cache
from delegate_runtime.gpu.opencl.cache import KernelCache

pytestmark = pytest.mark.lowering_cache

FACTS = ("model-sha", "fp32", False, 4, [[0, 1, 2]])


def test_the_key_changes_with_each_fact_and_the_code(monkeypatch) -> None:
    key = lowering_cache.lowering_key("NVIDIA H200", "580.159.04", FACTS)
    assert key == lowering_cache.lowering_key("NVIDIA H200", "580.159.04", FACTS)
    others = [
        lowering_cache.lowering_key("NVIDIA H100", "580.159.04", FACTS),
        lowering_cache.lowering_key("NVIDIA H200", "580.95.05", FACTS),
        lowering_cache.lowering_key("NVIDIA H200", "580.159.04", (*FACTS[:3], 8, FACTS[4])),
        lowering_cache.lowering_key("NVIDIA H200", "580.159.04", (*FACTS[:4], [[0, 1]])),
    ]
    assert len({k.fingerprint() for k in [key, *others]}) == 5
    monkeypatch.setattr(lowering_cache, "code_digest", lambda: "0" * 64)  # other code
    assert lowering_cache.lowering_key("NVIDIA H200", "580.159.04", FACTS) != key


def test_the_code_digest_covers_the_delegate_s_kernels_and_modules() -> None:
    digest = lowering_cache.code_digest()
    assert len(digest) == 64 and digest == lowering_cache.code_digest()


def test_a_kept_lowering_is_read_back_whole(tmp_path) -> None:
    cache = KernelCache(tmp_path)
    key = lowering_cache.lowering_key("dev", "drv", FACTS)
    assert lowering_cache.load(cache, key) is None
    lowering = {"units": ["__kernel void k() {}"], "consts": list(range(10))}
    lowering_cache.store(cache, key, lowering)
    assert lowering_cache.load(cache, key) == lowering


def test_an_entry_that_does_not_unpickle_is_removed(tmp_path) -> None:
    cache = KernelCache(tmp_path)
    key = lowering_cache.lowering_key("dev", "drv", FACTS)
    cache.store(key, pickle.dumps([1, 2, 3])[:-3])  # checksummed, yet not a whole pickle
    assert lowering_cache.load(cache, key) is None
    assert not cache.holds(key) and cache.rejected == 1


def _entry(cache: KernelCache, n: int, payload_bytes: int) -> object:
    key = lowering_cache.lowering_key("dev", "drv", (*FACTS, n))
    lowering_cache.store(cache, key, b"x" * payload_bytes)
    return key


def test_the_folder_keeps_within_its_bound_the_least_recently_used_going_first(
    tmp_path, monkeypatch
) -> None:
    import os

    cache = KernelCache(tmp_path)
    monkeypatch.setenv(lowering_cache.ENV_BOUND, str(3 * 1200))  # about three entries
    keys = [_entry(cache, n, 1000) for n in range(3)]
    for age, key in enumerate(keys):  # made in this order, a second apart
        os.utime(cache.path(key), (1_000_000 + age, 1_000_000 + age))
    assert lowering_cache.load(cache, keys[0]) == b"x" * 1000  # read: used last now
    fourth = _entry(cache, 3, 1000)
    assert [cache.holds(k) for k in keys] == [True, False, True]  # the least recent went
    assert cache.holds(fourth)


def test_a_bound_of_nothing_keeps_nothing_and_a_bad_one_is_refused(tmp_path, monkeypatch):
    from delegate_runtime.errors import UsageError

    cache = KernelCache(tmp_path)
    monkeypatch.setenv(lowering_cache.ENV_BOUND, "0")
    assert not cache.holds(_entry(cache, 0, 10))
    monkeypatch.setenv(lowering_cache.ENV_BOUND, "2GB")
    with pytest.raises(UsageError, match="DEVICEFARM_LOWERING_CACHE_BYTES"):
        _entry(cache, 1, 10)


def test_arrays_are_read_back_as_views_of_the_entry_unwritable(tmp_path) -> None:
    import numpy as np

    cache = KernelCache(tmp_path)
    key = lowering_cache.lowering_key("dev", "drv", FACTS)
    weights = np.arange(1000, dtype=np.float32).reshape(10, 100)
    lowering_cache.store(cache, key, {"w": weights, "units": ["k"]})
    got = lowering_cache.load(cache, key)
    np.testing.assert_array_equal(got["w"], weights)
    assert got["w"].dtype == np.float32 and got["w"].ctypes.data % lowering_cache.ALIGN == 0
    assert not got["w"].flags.writeable  # the file's pages, not a copy


def test_a_damaged_array_byte_fails_the_check_and_the_entry_goes(tmp_path) -> None:
    import numpy as np

    cache = KernelCache(tmp_path)
    key = lowering_cache.lowering_key("dev", "drv", FACTS)
    lowering_cache.store(cache, key, {"w": np.ones(4096, np.float32)})
    path = cache.path(key)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x40  # inside the array's bytes, past the pickle
    path.write_bytes(bytes(raw))
    assert lowering_cache.load(cache, key) is None
    assert not cache.holds(key) and cache.rejected == 1


def test_a_torn_entry_fails_its_check(tmp_path) -> None:
    import numpy as np

    cache = KernelCache(tmp_path)
    key = lowering_cache.lowering_key("dev", "drv", FACTS)
    lowering_cache.store(cache, key, {"w": np.ones(4096, np.float32)})
    path = cache.path(key)
    path.write_bytes(path.read_bytes()[:-100])  # a write cut short
    assert lowering_cache.load(cache, key) is None and cache.rejected == 1


def test_another_key_s_entry_is_not_read(tmp_path) -> None:
    cache = KernelCache(tmp_path)
    key = lowering_cache.lowering_key("dev", "drv", FACTS)
    other = lowering_cache.lowering_key("dev", "drv", (*FACTS, "other"))
    lowering_cache.store(cache, key, [1, 2, 3])
    cache.path(key).rename(cache.path(other))  # a file under a name not its own
    assert lowering_cache.load(cache, other) is None and cache.rejected == 1


def test_where_files_cannot_be_mapped_the_entry_is_read_whole(tmp_path, monkeypatch) -> None:
    import mmap

    import numpy as np

    cache = KernelCache(tmp_path)
    key = lowering_cache.lowering_key("dev", "drv", FACTS)
    lowering_cache.store(cache, key, {"w": np.arange(64, dtype=np.float32)})

    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")  # as mmap(2) answers on such a file system

    monkeypatch.setattr(mmap, "mmap", refuse)
    got = lowering_cache.load(cache, key)
    np.testing.assert_array_equal(got["w"], np.arange(64, dtype=np.float32))
    assert cache.holds(key) and cache.rejected == 0
