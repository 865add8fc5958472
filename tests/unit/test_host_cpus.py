"""delegate_runtime.host_cpus: the CPUs a process may use, from its affinity and the CPU
quotas of fake cgroup trees (v2 and v1, nested), and a subprocess confined to one CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from delegate_runtime import host_cpus

REPO = Path(__file__).resolve().parents[2]


def tree(root: Path, files: dict[str, str], membership: str) -> Path:
    """A fake cgroup mount at `root` with `files` (path -> text) and a /proc/self/cgroup
    of `membership`; returns the membership file."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    proc = root.parent / "proc_self_cgroup"
    proc.write_text(membership)
    return proc


@pytest.mark.parametrize(
    ("cpu_max", "quota"),
    [("max 100000", None), ("200000 100000", 2.0), ("150000 100000", 1.5), ("50000 100000", 0.5)],
)
def test_a_v2_quota(tmp_path, cpu_max, quota):
    proc = tree(tmp_path / "cg", {"cpu.max": cpu_max}, "0::/\n")
    assert host_cpus.quota_cpus(tmp_path / "cg", proc) == quota


def test_the_tightest_v2_quota_among_the_cgroup_and_its_ancestors(tmp_path):
    root = tmp_path / "cg"
    files = {
        "lab.slice/cpu.max": "300000 100000",
        "lab.slice/agent.scope/cpu.max": "max 100000",
        "cpu.max": "800000 100000",
    }
    proc = tree(root, files, "0::/lab.slice/agent.scope\n")
    assert host_cpus.quota_cpus(root, proc) == 3.0


def test_a_v1_quota_and_none(tmp_path):
    root = tmp_path / "cg"
    membership = "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n"
    files = {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "250000",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
    }
    proc = tree(root, files, membership)
    assert host_cpus.quota_cpus(root, proc) == 2.5
    (root / "cpu,cpuacct/docker/abc/cpu.cfs_quota_us").write_text("-1\n")
    assert host_cpus.quota_cpus(root, proc) is None


def test_a_container_whose_cgroup_is_the_mount_root(tmp_path):
    """Without a cgroup namespace /proc/self/cgroup names the host's path, which does not
    exist in the container's mount: the mount's root (the container's cgroup) counts."""
    proc = tree(tmp_path / "cg", {"cpu.max": "100000 100000"}, "0::/docker/abc123\n")
    assert host_cpus.quota_cpus(tmp_path / "cg", proc) == 1.0


def test_no_cgroup_files_is_no_quota(tmp_path):
    assert host_cpus.quota_cpus(tmp_path / "none", tmp_path / "missing") is None
    proc = tree(tmp_path / "cg", {"cpu.max": "garbage"}, "0::/\n")
    assert host_cpus.quota_cpus(tmp_path / "cg", proc) is None


@pytest.mark.parametrize(
    ("cpus", "quota", "usable"),
    [(16, None, 16), (16, 2.0, 2), (16, 2.9, 2), (16, 0.5, 1), (2, 8.0, 2), (0, None, 1)],
)
def test_usable_is_the_affinity_bounded_by_the_quota(cpus, quota, usable):
    assert host_cpus.usable(cpus, quota) == usable


def test_usable_cpus_reads_the_fake_tree_once(tmp_path):
    proc = tree(tmp_path / "cg", {"cpu.max": "100000 100000"}, "0::/\n")
    host_cpus.forget()
    try:
        assert host_cpus.usable_cpus(tmp_path / "cg", proc) == 1
        (tmp_path / "cg/cpu.max").write_text("max 100000\n")
        assert host_cpus.usable_cpus(tmp_path / "cg", proc) == 1  # measured once
        host_cpus.forget()
        assert host_cpus.usable_cpus(tmp_path / "cg", proc) == len(host_cpus.affinity())
    finally:
        host_cpus.forget()


def test_a_process_confined_to_one_cpu_may_use_one():
    cpu = min(os.sched_getaffinity(0))
    code = (
        "import json, os\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "from delegate_runtime import host_cpus\n"
        "print(json.dumps([sorted(host_cpus.affinity()), host_cpus.usable_cpus()]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == [[cpu], 1]
