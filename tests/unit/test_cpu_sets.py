"""worker_agent.cpu_sets: the host's CPUs split between device consumers (pure), the helper
budget of shared CPUs, pinning a process with its threads, and an agent whose consumer
processes really run on their sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delegate_runtime.errors import JobError
from delegate_runtime.gpu.opencl.host_copy import BUDGET_ENV
from tests.conftest import require
from worker_agent import agent as agent_module
from worker_agent import cpu_sets
from worker_agent.agent import Agent
from worker_agent.devices import DeviceInfo

REPO = Path(__file__).resolve().parents[2]
REF, GPU_A, GPU_B = "cpu:reference:h", "opencl:nvidia:a:h", "opencl:nvidia:b:h"


def test_the_reference_gets_a_core_and_the_gpus_the_rest_evenly():
    sets = cpu_sets.split(range(16), {REF: "cpu", GPU_A: "opencl", GPU_B: "opencl"})
    assert sets == {
        REF: frozenset({15}),
        GPU_A: frozenset(range(7)),
        GPU_B: frozenset(range(7, 15)),
    }


def test_the_reference_takes_its_core_whole_and_gpus_keep_siblings_together():
    cores = {cpu: cpu % 8 for cpu in range(16)}  # CPUs n and n+8: one core's two threads
    sets = cpu_sets.split(range(16), {REF: "cpu", GPU_A: "opencl", GPU_B: "opencl"}, cores)
    assert sets[REF] == {7, 15}
    assert sets[GPU_A] == {0, 1, 2, 8, 9, 10} and sets[GPU_B] == {3, 4, 5, 6, 11, 12, 13, 14}


def test_phones_share_the_gpus_cpus_never_the_references():
    kinds = {REF: "cpu", GPU_A: "opencl", "android:x": "android", "noop:y": "noop"}
    sets = cpu_sets.split([0, 1, 2, 3], kinds)
    assert sets[REF] == {3} and sets[GPU_A] == {0, 1, 2}
    assert sets["android:x"] == sets["noop:y"] == {0, 1, 2}
    only_phones = cpu_sets.split([0, 1, 2, 3], {REF: "cpu", "android:x": "android"})
    assert only_phones == {REF: frozenset({3}), "android:x": frozenset({0, 1, 2})}


def test_without_a_reference_the_gpus_split_every_cpu():
    sets = cpu_sets.split([4, 5, 6, 7, 8], {GPU_A: "opencl", GPU_B: "opencl"})
    assert sets == {GPU_A: frozenset({4, 5}), GPU_B: frozenset({6, 7, 8})}


@pytest.mark.parametrize(
    ("cpus", "kinds"),
    [
        ([0], {REF: "cpu", GPU_A: "opencl"}),
        ([0, 1], {REF: "cpu", GPU_A: "opencl", GPU_B: "opencl"}),
        ([0], {REF: "cpu", "noop:y": "noop"}),
    ],
)
def test_too_few_cpus_to_pin_is_refused_with_the_way_out(cpus, kinds):
    with pytest.raises(JobError, match="run without --pin-cpus"):
        cpu_sets.split(cpus, kinds)


@pytest.mark.parametrize(
    ("usable", "gpus", "reference", "budget"),
    [(16, 1, True, 14), (16, 1, False, 15), (2, 1, True, 0), (16, 4, True, 2), (16, 8, True, 0)],
)
def test_the_helper_budget_fits_callers_helpers_and_the_reference(usable, gpus, reference, budget):
    assert cpu_sets.helper_budget(usable, gpus, reference) == budget
    assert gpus * (budget + 1) + int(reference) <= usable or budget == 0


def test_the_shared_layout_budgets_only_gpu_consumers():
    kinds = {REF: "cpu", GPU_A: "opencl", "noop:y": "noop"}
    places = cpu_sets.layout(kinds, range(16), 16, pin=False)
    assert places == {
        REF: cpu_sets.ConsumerCpus(None, None),
        GPU_A: cpu_sets.ConsumerCpus(None, 14),
        "noop:y": cpu_sets.ConsumerCpus(None, None),
    }
    pinned = cpu_sets.layout(kinds, range(16), 16, pin=True)
    assert pinned[GPU_A] == cpu_sets.ConsumerCpus(frozenset(range(15)), None)


@pytest.mark.parametrize(("text", "cpus"), [("0-3,8", {0, 1, 2, 3, 8}), ("5", {5}), ("", set())])
def test_cpu_lists_both_ways(text, cpus):
    assert cpu_sets.parse_list(text) == cpus
    assert cpu_sets.format_list(cpus) == text


def test_cores_from_sysfs(tmp_path):
    for cpu, siblings in ((0, "0,2"), (1, "1,3"), (2, "0,2"), (3, "1,3")):
        folder = tmp_path / f"cpu{cpu}/topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(siblings + "\n")
    assert cpu_sets.cores_of([0, 1, 2, 3, 4], tmp_path) == {0: 0, 1: 1, 2: 0, 3: 1, 4: 4}


@pytest.mark.parametrize(("raw", "on"), [("", False), ("0", False), ("1", True), ("yes", True)])
def test_the_pin_switch(monkeypatch, raw, on):
    monkeypatch.setenv(cpu_sets.PIN_ENV, raw)
    assert cpu_sets.pin_default() is on


def test_a_bad_pin_switch_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(cpu_sets.PIN_ENV, "maybe")
    with pytest.raises(JobError, match=cpu_sets.PIN_ENV):
        cpu_sets.pin_default()


def test_pin_confines_the_threads_already_running():
    """A thread started before `pin` runs on the set too, and usable_cpus follows."""
    cpu = max(os.sched_getaffinity(0))
    code = (
        "import json, os, threading\n"
        "from delegate_runtime import host_cpus\n"
        "from worker_agent import cpu_sets\n"
        "before = host_cpus.usable_cpus()\n"
        "done = threading.Event()\n"
        "t = threading.Thread(target=done.wait); t.start()\n"
        f"cpu_sets.pin({{{cpu}}})\n"
        "lists = [open(f'/proc/self/task/{tid}/status').read().split('Cpus_allowed_list:')[1]"
        ".split()[0] for tid in os.listdir('/proc/self/task')]\n"
        "done.set(); t.join()\n"
        "print(json.dumps([lists, host_cpus.usable_cpus()]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    lists, usable = json.loads(out.stdout)
    assert len(lists) >= 2 and set(lists) == {str(cpu)}
    assert usable == 1


def test_the_shared_agent_gives_gpu_consumers_a_budget_and_no_cpus(tmp_path, monkeypatch):
    started: dict[str, tuple[list[str], dict[str, str]]] = {}

    class Popen:
        def __init__(self, cmd, env, stdout, stderr):
            device = json.loads(cmd[cmd.index("--device") + 1])
            started[device["key"]] = (cmd, env)

    monkeypatch.setattr(agent_module.subprocess, "Popen", Popen)
    monkeypatch.setenv(BUDGET_ENV, "99")  # the agent's own environment does not leak
    agent = Agent(
        f"sqlite:///{tmp_path / 'farm.db'}",
        "unused://",
        [DeviceInfo(REF, "cpu"), DeviceInfo(GPU_A, "opencl")],
        pin_cpus=False,
    )
    for key in agent.devices:
        agent._start_consumer(key)
    budget = cpu_sets.helper_budget(len(os.sched_getaffinity(0)), 1, True)
    assert started[GPU_A][1][BUDGET_ENV] == str(budget)
    assert BUDGET_ENV not in started[REF][1]
    assert not any("--cpus" in cmd for cmd, _ in started.values())


def allowed(pid: int) -> str:
    """The Cpus_allowed_list of every thread of `pid` and of its children, joined."""
    lists = set()
    for proc in [pid, *children(pid)]:
        for tid in os.listdir(f"/proc/{proc}/task"):
            status = Path(f"/proc/{proc}/task/{tid}/status").read_text()
            lists.add(status.split("Cpus_allowed_list:")[1].split()[0])
    return ",".join(sorted(lists))


def children(pid: int) -> list[int]:
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return found


def logs(folder: Path) -> str:
    return "\n".join(p.read_text()[-2000:] for p in sorted(folder.glob("*.log")))


def test_pinned_consumer_processes_run_on_their_own_cpus(tmp_path):
    """Real consumer processes (Celery workers on a filesystem broker), the CPU reference's
    and a GPU's (its runner starts only with a job): each, its threads and its pool child
    run on the set the agent gave it, and the sets are disjoint."""
    require(len(os.sched_getaffinity(0)) >= 2, "2 CPUs to split")
    agent = Agent(
        f"sqlite:///{tmp_path / 'farm.db'}",
        f"filesystem://{tmp_path / 'broker'}",
        [DeviceInfo(REF, "cpu", host="h"), DeviceInfo(GPU_A, "opencl", host="h")],
        name="pin-test",
        log_dir=tmp_path / "logs",
        pin_cpus=True,
    )
    layout = agent.cpu_layout()
    want = {k: cpu_sets.format_list(p.cpus or ()) for k, p in layout.items()}
    assert not layout[REF].cpus & layout[GPU_A].cpus
    try:
        agent.register()
        agent.supervise_once()
        deadline = time.monotonic() + 90
        seen: dict[str, str] = {}
        while time.monotonic() < deadline:
            seen = {}
            for key, proc in agent.consumers.items():
                assert proc.poll() is None, logs(tmp_path / "logs")
                if children(proc.pid):  # the pool child is up: the worker started
                    seen[key] = allowed(proc.pid)
            if seen == want:
                break
            time.sleep(0.5)
        assert seen == want
    finally:
        agent.stop(grace_s=10)
