"""The README's main job on this machine, cold, alone and beside busy processes.

    python bench/main_job_cold.py [--busy 0,6]

For each count of busy processes (each spinning `while True: pass`), a new user (HOME),
every kernel cache empty (ours through XDG_CACHE_HOME, PoCL's through POCL_CACHE_DIR, made
so explicitly) and no DEVICEFARM_* setting: `devicefarm example example.tflite`, then
`devicefarm run example.tflite`, each line timed. Prints the whole time, the longest
silence and the load average per case; the anchor is the first case (usually idle), run
in the same call.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fresh_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVICEFARM_", "XDG_"))}
    return env | {
        "HOME": str(root / "user"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "POCL_CACHE_DIR": str(root / "pocl"),
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
    }


def timed(cmd: list[str], env: dict[str, str], cwd: Path, start: float) -> tuple[int, list[float]]:
    """The command's exit status and the time of each line it printed (from `start`)."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    stamps = [time.monotonic() - start for _ in proc.stdout]
    return proc.wait(), stamps


def main_job(busy: int) -> dict[str, float]:
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        with tempfile.TemporaryDirectory(prefix="main-job-") as tmp:
            root = Path(tmp)
            env, devicefarm = fresh_env(root), [sys.executable, "-m", "devicefarm"]
            start = time.monotonic()
            made, first = timed([*devicefarm, "example", "example.tflite"], env, root, start)
            ran, lines = timed([*devicefarm, "run", "example.tflite"], env, root, start)
            took = time.monotonic() - start
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    if made or ran:
        raise SystemExit(f"the main job failed (example: {made}, run: {ran})")
    stamps = [0.0, *first, *lines, took]
    silence = max(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    return {"took_s": took, "silence_s": silence, "load": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", default="0,6", help="busy process counts, comma-separated")
    counts = [int(n) for n in ap.parse_args().busy.split(",")]
    print("| busy processes | main job s | longest silence s | load (1 min) at the end | / first |")
    print("| --- | --- | --- | --- | --- |")
    anchor = None
    for busy in counts:
        r = main_job(busy)
        anchor = anchor or r["took_s"]
        print(
            f"| {busy} | {r['took_s']:.1f} | {r['silence_s']:.1f} | {r['load']:.2f} "
            f"| {r['took_s'] / anchor:.2f}x |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
