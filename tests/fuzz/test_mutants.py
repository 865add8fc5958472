"""Mutated models, run to the end: bit flips, hostile 32-bit values and truncations of the
shared conformance models and of small builder models (hostile.BENIGN), each read, set up
and invoked on the CPU reference and on the GPU delegate in a child under a memory and a
time limit (sandbox.py). Every mutant must end clearly: 0 tracebacks, 0 MemoryError or
killed children, 0 hangs.

CI runs a bounded number (FUZZ_MUTANTS per kind and backend, default below); FUZZ_FULL=1
runs the full count. Figures (outcomes, max RSS) are printed at the end and, with
FUZZ_REPORT=path, written there as JSON.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hostile import BENIGN
from sandbox import Sandbox

HERE = Path(__file__).resolve().parent
FULL = os.environ.get("FUZZ_FULL", "") not in ("", "0")
#: Mutants per mutation kind and backend: the full run, and CI's bounded one.
FULL_COUNTS = {"cpu": 1700, "gpu": 170}
CI_COUNTS = {"cpu": 40, "gpu": 8}
SEED = int(os.environ.get("FUZZ_SEED", "0"))
#: Deadline of one mutant's invoke: short, as a mutant of a loop may loop for ever.
MUTANT_DEADLINE_S = 1.0
#: 32-bit values that break trust: -1, sign bits, huge sizes, zero.
HOSTILE_WORDS = (-1, 0, 1, 2**15, 2**16, 2**24, 2**30, 2**31 - 1, -(2**31), 65537)

OUTCOMES: dict[str, Counter[str]] = {"cpu": Counter(), "gpu": Counter()}
MAX_RSS_KIB: dict[str, int] = {"cpu": 0, "gpu": 0}


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


surgery = _load("_fuzz_model_surgery", HERE.parent / "unit" / "model_surgery.py")
require = _load("_fuzz_tests_conftest", HERE.parent / "conftest.py").require


def _count(backend: str) -> int:
    env = os.environ.get("FUZZ_MUTANTS")
    if env:
        return int(env)
    return (FULL_COUNTS if FULL else CI_COUNTS)[backend]


def _seeds() -> list[tuple[str, bytes]]:
    seeds = [(f"builder_{n}", make()[0]) for n, make in sorted(BENIGN.items())]
    seeds += [(p.stem, p.read_bytes()) for p in surgery.dev_models()]
    return seeds


def _flip_bits(rng: random.Random, data: bytes, structure: list[int]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        pos = rng.choice(structure) if structure and rng.random() < 0.8 else rng.randrange(len(buf))
        buf[pos] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _hostile_words(rng: random.Random, data: bytes, structure: list[int]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        pos = rng.choice(structure) if structure and rng.random() < 0.5 else rng.randrange(len(buf))
        pos -= pos % 4
        word = rng.choice(HOSTILE_WORDS).to_bytes(4, "little", signed=True)
        buf[pos : pos + 4] = word
    return bytes(buf[: len(data)])


def _truncate_or_splice(rng: random.Random, data: bytes, structure: list[int]) -> bytes:
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randint(1, 256))
    if rng.random() < 0.5:
        return data[:a]
    return data[:a] + data[b:] if rng.random() < 0.5 else data[:b] + data[a:b] + data[b:]


MUTATIONS: dict[str, Callable[[random.Random, bytes, list[int]], bytes]] = {
    "bit_flips": _flip_bits,
    "hostile_words": _hostile_words,
    "truncate_or_splice": _truncate_or_splice,
}


def _opencl_available() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:
        return False


@pytest.fixture(scope="module")
def seeds() -> Iterator[list[tuple[str, bytes, list[int]]]]:
    found = [(n, d, surgery.structure_positions(d).tolist()) for n, d in _seeds()]
    yield found
    figures = {
        backend: {
            "mutants": sum(OUTCOMES[backend].values()),
            "outcomes": dict(sorted(OUTCOMES[backend].items())),
            "max_rss_mib": round(MAX_RSS_KIB[backend] / 1024, 1),
        }
        for backend in OUTCOMES
    }
    print(f"\nfuzz mutants ({len(found)} seeds, full={FULL}): {json.dumps(figures)}")
    if os.environ.get("FUZZ_REPORT"):
        Path(os.environ["FUZZ_REPORT"]).write_text(json.dumps(figures, indent=2) + "\n")


@pytest.mark.parametrize("kind", sorted(MUTATIONS))
@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_mutants_end_clearly(
    seeds: list[tuple[str, bytes, list[int]]], backend: str, kind: str, tmp_path: Path
) -> None:
    """Each failing mutant is kept in tmp_path (named in the failure) to reproduce it."""
    if backend == "gpu":
        require(_opencl_available(), "an OpenCL platform (PoCL)")
    rng = random.Random(f"{SEED}-{backend}-{kind}")
    bad = []
    with Sandbox(deadline_s=MUTANT_DEADLINE_S) as sandbox:
        for i in range(_count(backend)):
            name, data, structure = rng.choice(seeds)
            mutant = MUTATIONS[kind](rng, data, structure)
            start = time.perf_counter()
            outcome = sandbox.run(backend, mutant)
            OUTCOMES[backend][outcome.kind] += 1
            if not outcome.clear:
                path = tmp_path / f"{name}.{kind}.{i}.tflite"
                path.write_bytes(mutant)
                bad.append(
                    f"{path} ({time.perf_counter() - start:.1f} s): {outcome.kind}\n"
                    f"{outcome.message}"
                )
        MAX_RSS_KIB[backend] = max(MAX_RSS_KIB[backend], sandbox.max_rss_kib)
    assert not bad, f"{len(bad)} mutants did not end clearly:\n" + "\n".join(bad[:5])
