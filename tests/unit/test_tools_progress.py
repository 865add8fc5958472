"""Progress of long work: a bar on a terminal, a plain line every LINE_INTERVAL_S in logs."""

from __future__ import annotations

import io

import pytest

from delegate_runtime.tools.progress import (
    LINE_INTERVAL_S,
    LINES,
    Reporter,
    progress_line,
    progress_mode,
)


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "flag, tty, mode",
    [
        (None, True, True),
        (None, False, LINES),
        (True, False, True),
        (False, True, False),
    ],
    ids=["unset_terminal", "unset_log", "true_log", "false_terminal"],
)
def test_progress_mode(flag, tty, mode):
    assert progress_mode(flag, _Stream(tty)) == mode


@pytest.mark.parametrize(
    "done, total, elapsed, line",
    [
        (12, 50, 39.7, "benchmark: 12/50 runs, 3.31 s/run, 40 s"),
        (500, 1000, 10.0, "benchmark: 500/1000 runs, 50 runs/s, 10 s"),
        (7, None, 14.0, "benchmark: 7 runs, 2 s/run, 14 s"),
        (900, 50, 10.0, "benchmark: 900 runs, 90 runs/s, 10 s"),
        (0, 50, 12.0, "benchmark: 0/50 runs, no run finished yet, 12 s"),
        (10_200, 30_000, 10.0, "benchmark: 10200/30000 runs, 1020 runs/s, 10 s"),
        (1, 2, 1500.0, "benchmark: 1/2 runs, 1500 s/run, 1500 s"),
    ],
    ids=["slow", "fast", "no_total", "past_total", "none_done", "very_fast", "very_slow"],
)
def test_progress_line(done, total, elapsed, line):
    assert progress_line("benchmark", done, total, elapsed) == line


def test_lines_come_every_interval_and_not_before():
    stream, clock = _Stream(False), _Clock()
    reporter = Reporter(LINES, stream=stream, clock=clock)
    reporter.start("inference diff", 10)
    for _ in range(10):  # 3.3 s per run, as MobileNet on PoCL
        clock.now += 3.3
        reporter.update()
    reporter.close()
    assert stream.getvalue().splitlines() == [
        "inference diff: 4/10 runs, 3.3 s/run, 13 s",  # the first at 13.2 s
        "inference diff: 8/10 runs, 3.3 s/run, 26 s",  # 10 s later: 26.4 s, not 23.1 s
    ]
    assert LINE_INTERVAL_S == 10.0


def test_quick_work_prints_no_line():
    stream, clock = _Stream(False), _Clock()
    reporter = Reporter(LINES, stream=stream, clock=clock)
    reporter.start("benchmark", 50)
    for _ in range(50):
        clock.now += 0.1
        reporter.update()
    assert stream.getvalue() == ""


def test_no_progress_prints_nothing():
    stream, clock = _Stream(False), _Clock()
    reporter = Reporter(False, stream=stream, clock=clock)
    reporter.start("benchmark", 3)
    clock.now += 60
    reporter.update()
    assert stream.getvalue() == ""
