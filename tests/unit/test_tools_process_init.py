"""Init split: what a process pays once against what each model pays."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from delegate_runtime.tools.process_init import init_split_line, prepare_process


def test_the_process_part_is_paid_once():
    prepare_process("cpu")
    assert prepare_process("cpu") < 20_000  # us: modules already imported


@pytest.mark.parametrize(
    "session, detail",
    [
        (SimpleNamespace(), "(read 3.2, session 1.9)"),
        (
            SimpleNamespace(
                init_phases_ms={
                    "fold_and_partition": 2.04,
                    "device": 0.4,
                    "lower": 5.1,
                    "context": 0.2,
                    "program": 30.0,
                    "launch_loop": 0.01,
                    "upload": 30.4,
                    "total": 67.9,
                },
                program_from_cache=True,
                specialized_kernels=14,
                launch_loop="c",
            ),
            "(read 3.2, session 1.9: fold and partition 2.0, device 0.4, lower 5.1, context "
            "(beyond the lowering and layout) 0.2, program 30.0 (14 specialized, from cache), launch loop 0.0 (c), upload 30.4)",
        ),
        (
            SimpleNamespace(
                init_phases_ms={"program": 30.0, "upload": 30.4, "total": 60.4},
                program_from_cache=False,
                options=SimpleNamespace(precision="fp16"),
                half_weights=False,
            ),
            "(read 3.2, session 1.9: program 30.0, upload 30.4 (weights in float32))",
        ),
        (
            SimpleNamespace(
                init_phases_ms={"launch_loop": 0.01, "total": 0.01},
                program_from_cache=True,
                launch_loop="c",
                persistent_runs=(21, 1),
            ),
            "(read 3.2, session 1.9: launch loop 0.0 (c, 21 launches in 1 persistent))",
        ),
    ],
    ids=["cpu", "gpu", "gpu-fp16", "gpu-persistent"],
)
def test_init_split_line(session, detail):
    line = init_split_line(1102_300, 3_200, 1_900, session)
    assert line == (
        "Init split (ms): once per process 1102.3 (runtime modules, OpenCL device), "
        f"this model 5.1 {detail}"
    )
