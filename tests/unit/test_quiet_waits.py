"""No wait sits more than 10 s in silence: a campaign's wait says where it stands, a job's
init shows its time growing, a canary says it is still running."""

from __future__ import annotations

import io
import threading
import time

from devicefarm.wait_lines import QUIET_S, CampaignLines, JobView
from worker_agent.runners.job_progress import JobProgress
from worker_agent.ticking import ticking


def job(state: str, progress: str = "", job_id: int = 1) -> JobView:
    return JobView(job_id, "a" * 64, "m", "opencl:pocl", "gpu-fp16", state, progress=progress)


def test_a_quiet_campaign_says_where_it_stands_every_quiet_s() -> None:
    lines = CampaignLines()
    jobs = [job("running"), job("queued", job_id=2)]
    said = [t for t in (x * 0.25 for x in range(1, 161)) if lines.update(jobs, t)]
    gaps = [b - a for a, b in zip([0.0, *said], said, strict=False)]
    assert said and max(gaps) <= QUIET_S + 0.25 and QUIET_S <= 9.0
    assert (
        "1 running (opencl:pocl gpu-fp16, starting), 1 queued, 0 of 2 ended"
        in lines.update(jobs, 100.0)[0]
    )


def test_a_progress_line_counts_as_a_line() -> None:
    lines = CampaignLines()
    assert lines.update([job("running", "init: 3 s")], 3.0) == [
        "  opencl:pocl gpu-fp16: running, init: 3 s (t+3.0 s)"
    ]
    assert lines.update([job("running", "init: 3 s")], 3.0 + QUIET_S - 0.5) == []


def test_an_ended_campaign_says_nothing_more() -> None:
    lines = CampaignLines()
    done = [job("succeeded")]
    assert len(lines.update(done, 1.0)) == 1
    assert lines.update(done, 60.0) == []


def test_a_jobs_init_shows_its_time_growing() -> None:
    now = [100.0]
    progress = JobProgress(7, stream=io.StringIO(), clock=lambda: now[0])
    progress("init", 0, None)
    now[0] += 40
    assert progress.line() == "init: 40 s"
    now[0] += 10
    assert progress.line() == "init: 50 s"
    progress("benchmark", 0, 50)
    now[0] += 4
    progress("benchmark", 2, 50)
    assert progress.line() == "benchmark: 2/50 runs, 2 s/run, 4 s"


def test_ticking_says_a_line_every_interval_until_the_block_ends() -> None:
    said: list[str] = []
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            said.append(line)

    with ticking(say, "canary opencl:pocl: running", every_s=0.05):
        time.sleep(0.3)
    count = len(said)
    time.sleep(0.15)
    assert count >= 3 and len(said) == count  # none after the block
    assert said[0].startswith("canary opencl:pocl: running: ") and said[0].endswith(" s")
