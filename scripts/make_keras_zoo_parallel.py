#!/usr/bin/env python3
"""Build the Keras zoo (scripts/make_keras_zoo.py) in several processes at once.

    python scripts/make_keras_zoo_parallel.py [--out DIR] [--jobs N]

A model's build and conversion run on one core (TensorFlow's converter and calibration:
99 % of one CPU, measured), so on a 2-core machine one process left a core idle for the
10-13 minutes a fresh machine's zoo takes. This splits the models the zoo lacks (missing,
or built by an older recipe) over `--jobs` processes (default: one per CPU), each running
make_keras_zoo.py into a folder of its own, then moves their files into DIR and merges
their manifests. make_keras_zoo.py itself is unchanged: its hash is the files' recipe, and
a driver beside it changes no file it builds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "make_keras_zoo.py"
sys.path.insert(0, str(REPO))


def to_build(zoo: Any, out: Path) -> list[str]:
    """The models whose files `out` lacks or holds from an older recipe, in the zoo's order."""
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    return [
        m.name
        for m in zoo.ZOO
        if not zoo.built_by_this_recipe(
            manifest, {v: out / f"{m.name}__{v}.tflite" for v in m.variants}
        )
    ]


def split(names: list[str], jobs: int) -> list[list[str]]:
    """`names` dealt to `jobs` groups back and forth (the zoo lists its large image models
    first, so each group gets a share of them)."""
    groups: list[list[str]] = [[] for _ in range(jobs)]
    for i, name in enumerate(names):
        turn, place = divmod(i, jobs)
        groups[place if turn % 2 == 0 else jobs - 1 - place].append(name)
    return [g for g in groups if g]


def merge(parts: list[Path], out: Path) -> None:
    """Each part's files moved into `out`, their manifest entries into out's manifest."""
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for part in parts:
        for path in sorted(part.glob("*.tflite")):
            os.replace(path, out / path.name)
        manifest |= json.loads((part / "manifest.json").read_text())
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    from labkit.zoo import KERAS_SCRIPT as zoo

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=zoo.DEFAULT_OUT)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs: at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    names = to_build(zoo, args.out)
    if not names:
        print("every model of the zoo is present")
        return 0
    groups = split(names, args.jobs)
    print(f"building {len(names)} models in {len(groups)} processes: {groups}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix=".parts-", dir=args.out))
    procs: list[subprocess.Popen] = []
    # a SIGTERM (CI cancelling the step) ends the builders too, through the finally below
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        parts = [scratch / str(i) for i in range(len(groups))]
        for part, group in zip(parts, groups, strict=True):
            command = [sys.executable, str(SCRIPT), "--out", str(part), "--only", *group]
            procs.append(subprocess.Popen(command))
        failed = [p.args for p in procs if p.wait() != 0]
        if failed:
            print(f"make_keras_zoo.py failed: {failed}", file=sys.stderr)
            return 1
        merge(parts, args.out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
