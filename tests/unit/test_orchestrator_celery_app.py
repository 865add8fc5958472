"""The Celery configuration the architecture decides, and queue naming."""

from __future__ import annotations

from farm_core.celery_app import make_app, queue_for, task_id
from farm_core.settings import JOB_HARD_LIMIT_S, JOB_SOFT_LIMIT_S, VISIBILITY_TIMEOUT_S


def test_long_job_settings() -> None:
    conf = make_app("redis://localhost:1/0").conf
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_soft_time_limit == JOB_SOFT_LIMIT_S < conf.task_time_limit
    assert conf.task_time_limit == JOB_HARD_LIMIT_S < VISIBILITY_TIMEOUT_S
    assert conf.broker_transport_options["visibility_timeout"] == VISIBILITY_TIMEOUT_S


def test_filesystem_broker_needs_no_server(tmp_path) -> None:
    conf = make_app(f"filesystem://{tmp_path}").conf
    assert conf.broker_url == "filesystem://"
    assert conf.broker_transport_options["data_folder_in"] == str(tmp_path / "queue")


def test_queue_names_are_safe_and_distinct() -> None:
    names = {queue_for(k) for k in ("opencl:a:b", "opencl:a_b", "opencl-a:b", "a.b:c")}
    assert len(names) == 4
    assert queue_for("opencl:pocl:x") == "df.opencl-3apocl-3ax"
    assert task_id(3, 2) == "df-job-3-2"
