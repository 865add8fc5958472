"""The persistent kernels' grid record (opencl/grid_record.py): the grid that held, kept
beside a kernel-cache entry, read back, and where the trials start from."""

from __future__ import annotations

from delegate_runtime.gpu.opencl import grid_record


def test_a_grid_kept_is_read_back_per_kernel(tmp_path):
    entry = str(tmp_path / "unit_abc.bin")
    assert grid_record.held(entry, "persistent0_0") is None
    grid_record.remember(entry, "persistent0_0", 132)
    grid_record.remember(entry, "persistent0_1", 264)
    assert grid_record.held(entry, "persistent0_0") == 132
    assert grid_record.held(entry, "persistent0_1") == 264
    assert grid_record.held(entry, "persistent1_0") is None


def test_no_entry_keeps_nothing(tmp_path):
    grid_record.remember(None, "persistent0_0", 132)
    assert grid_record.held(None, "persistent0_0") is None
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_record_is_ignored_then_written_anew(tmp_path):
    entry = str(tmp_path / "unit_abc.bin")
    for damaged in ('{"persistent0_0": "132"', "[132]", '{"persistent0_0": true}'):
        (tmp_path / "unit_abc.bin.grids").write_text(damaged)
        assert grid_record.held(entry, "persistent0_0") is None
    grid_record.remember(entry, "persistent0_0", 66)
    assert grid_record.held(entry, "persistent0_0") == 66


def test_trials_start_at_the_grid_that_held():
    sizes = [264, 132, 66]
    assert grid_record.to_try(sizes, None) == [264, 132, 66]
    assert grid_record.to_try(sizes, 132) == [132, 66]
    assert grid_record.to_try(sizes, 66) == [66]
    assert grid_record.to_try(sizes, 100) == [264, 132, 66]  # not offered now: all of them
