"""A device group: one process consuming the queues of many devices, one job at a time each.

The agent (worker_agent.groups) starts `python -m worker_agent.group --db URL --broker URL`
for devices that need no process of their own (no-op devices, phones) and steers it with
lines on its stdin: `serve <device JSON>` (consume that device's queue, or again after a
pause) and `pause <key>` (consume no more; a running job ends). End of input or SIGTERM is
a warm shutdown: consumption stops, running jobs end, and what was received but not
started goes back to its queue.

One kombu connection; per device a channel with prefetch 1 and a consumer on its queue, so
a device holds at most one message (plus retries waiting for their `eta`, each with a
credit of its own, as Celery counts them) and runs one job at a time. Only the main thread
touches kombu: it drains the broker, decodes each message (worker_agent.celery_message),
starts its job on a thread of its own (`tasks.run_dispatches` with the device's
ConsumerContext: claim, run, finish, refill), acks it once the job ended (acks_late), puts
it back when the database was unreachable, and enforces the time limits: past the soft
limit the job's runner block raises SoftTimeLimitExceeded (the job ends timed out), past
the hard limit the job is given up (message acked, lease no longer renewed, so the
reconciler moves it, as after Celery's kill) and its device takes nothing more until the
thread returns. A lost broker connection is reopened with backoff and every idle device
consumes again; jobs under way finish meanwhile; deliveries left in Redis's unacked hash
that this process does not hold are put back (`_take_back`). The shutdown is bounded: the
broker's part within CLOSE_DEADLINE_S, each Redis command within SOCKET_TIMEOUT_S. The
first consumption of devices served together is spread `STAGGER_STEP_S` apart, so their
first claims do not stampede.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import queue
import signal
import sys
import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from farm_core.celery_app import prepare_broker, queue_for, transport_options

from .celery_message import BadMessage, JobMessage, decode
from .consumer import ConsumerContext, GroupShared
from .devices import DeviceInfo, host_name

log = logging.getLogger("worker_agent.group")  # also when run as __main__

#: Between the first consumptions of devices served together (100 devices: 2 s).
STAGGER_STEP_S = 0.02
#: Broker wait per loop round while a job runs (its end is acked within this) and idle.
BUSY_WAIT_S = 0.01
IDLE_WAIT_S = 0.5
#: Reconnection backoff after the broker was lost: doubles from the first to the last.
RECONNECT_FIRST_S, RECONNECT_MAX_S = 0.5, 5.0
#: How long a device's BRPOP waits on Redis before it is sent again (kombu's default: 1 s).
#: Each reply wakes kombu's poller, which then walks every channel: at 1 s an idle group of
#: 100 devices took ~12 % of a core. A message still arrives at once; the shutdown unblocks
#: the waits (`_unblock`) rather than waiting them out.
BRPOP_WAIT_S = 30.0
#: A Redis command that has no answer after this long fails, and the group reconnects
#: (kombu's default waits for ever: a Redis that stops answering, frozen or cut off, held
#: the loop and the shutdown). A BRPOP's reply is read only once it arrived.
SOCKET_TIMEOUT_S = 5.0
#: The broker's part of a shutdown (putting back what was received and not started) may
#: take this long; past it the process exits and the next group takes those back.
CLOSE_DEADLINE_S = 5.0
#: What a job's thread asks of its message once it ended.
ACK, REQUEUE = "ack", "requeue"


@dataclass
class Running:
    """A device's job under way on a thread."""

    message: Any
    job: JobMessage
    started: float  #: monotonic
    thread: threading.Thread | None = None
    verdict: str = ""  #: ACK or REQUEUE, set by the thread as it ends
    ended: bool = False  #: set by the thread as it returns (after `verdict`)
    soft_sent: bool = False
    given_up: bool = False  #: past its hard limit: acked, left to end on its own


@dataclass
class Slot:
    """One device of the group."""

    ctx: ConsumerContext
    wanted: bool = False  #: served and not paused
    consume_at: float = 0.0  #: monotonic: not before (the stagger)
    channel: Any = None
    consumer: Any = None
    said_ready: bool = False
    running: Running | None = None
    ready: deque[tuple[Any, JobMessage]] = field(default_factory=deque)
    held: list[tuple[float, Any, JobMessage]] = field(default_factory=list)  #: eta waits

    @property
    def key(self) -> str:
        return self.ctx.device.key

    @property
    def idle(self) -> bool:
        return self.running is None and not self.ready


class DeviceGroup:
    """The devices this process serves, and the loop that consumes their queues."""

    def __init__(self, db_url: str, broker_url: str):
        from farm_core.database import make_engine
        from farm_core.dispatch import CeleryDispatcher

        self.db_url, self.broker_url = db_url, broker_url
        # small pools (DEVICEFARM_DB_POOL each, bursts past it): the devices' transactions
        # (rare: a move, a model's input file) and their statements (claim, lease, finish)
        self.shared = GroupShared(
            make_engine(db_url, durable=False),
            CeleryDispatcher(broker_url),
            make_engine(db_url, durable=False, autocommit=True),
        )
        self.slots: dict[str, Slot] = {}
        self.commands: queue.Queue[str | None] = queue.Queue()
        self.stopping = threading.Event()
        self.conn: Any = None
        self._next_start = 0.0
        self._retry_at = 0.0
        self._backoff = RECONNECT_FIRST_S
        self._host = host_name()
        #: set by a job's thread as it ends: wakes the loop when it waits on no broker
        self.job_ended = threading.Event()
        #: queue -> delivery tags left unacknowledged by consumers before this process
        self._left_behind: dict[str, list[str]] | None = None
        #: (list, message) popped by Redis for a BRPOP whose reply was still unread when the
        #: connection was lost (`_rescue_replies`), put back once Redis answers again
        self._rescued: list[tuple[bytes, bytes]] = []

    # -- control ------------------------------------------------------------------------

    def serve(self, device: DeviceInfo) -> None:
        """Consume `device`'s queue (again, after a pause), its first fetch staggered."""
        slot = self.slots.get(device.key)
        if slot is None:
            worker = f"{self._host}:{os.getpid()}:{device.key}"
            ctx = ConsumerContext(device, self.db_url, self.broker_url, worker)
            ctx.group = self.shared
            slot = self.slots[device.key] = Slot(ctx)
        elif slot.wanted:
            return
        else:
            slot.ctx.back_in_service()
        now = time.monotonic()
        slot.consume_at = self._next_start = max(now, self._next_start + STAGGER_STEP_S)
        slot.wanted = True

    def pause(self, key: str) -> None:
        """Consume no more for `key` (quarantined); a job under way ends."""
        slot = self.slots.get(key)
        if slot is not None and slot.wanted:
            slot.wanted = False
            self._cancel(slot)
            log.warning("%s paused: consumes no more", key)

    def _control(self) -> None:
        while True:
            try:
                line = self.commands.get_nowait()
            except queue.Empty:
                return
            if line is None:  # the agent closed our input: it is gone or stopping us
                self.stopping.set()
                continue
            verb, _, arg = line.strip().partition(" ")
            if verb == "serve":
                self.serve(DeviceInfo.from_json(arg))
            elif verb == "pause":
                self.pause(arg.strip())
            elif verb:
                log.error("unknown control line %r", line[:80])

    # -- the broker ---------------------------------------------------------------------

    def _connect(self) -> bool:
        from kombu import Connection

        now = time.monotonic()
        if self.conn is not None or now < self._retry_at:
            return self.conn is not None
        url = "filesystem://" if self.broker_url.startswith("filesystem://") else self.broker_url
        options = transport_options(self.broker_url)
        if self.broker_url.startswith(("redis://", "rediss://")):
            options["socket_timeout"] = SOCKET_TIMEOUT_S
        conn = Connection(url, transport_options=options)
        try:
            conn.connect()
        except Exception as exc:  # noqa: BLE001 - the broker is away: try again later
            with contextlib.suppress(Exception):
                conn.collect()
            log.warning("broker unreachable (%s); again in %g s", exc, self._backoff)
            self._retry_at = now + self._backoff
            self._backoff = min(self._backoff * 2, RECONNECT_MAX_S)
            return False
        self.conn, self._backoff = conn, RECONNECT_FIRST_S
        return True

    def _lost(self, exc: BaseException) -> None:
        """Forget the connection and every channel, putting nothing back from them: jobs
        under way and messages received but not started still run here (their acks may
        fail: the database holds each job's end, and a copy delivered again is stale)."""
        log.warning("broker connection lost (%s: %s); reconnecting", type(exc).__name__, exc)
        self._rescued.extend(self._rescue_replies())
        self._left_behind = None  # the next consumption looks again (`_take_back`)
        for slot in self.slots.values():
            if slot.channel is not None:
                slot.channel.do_restore = False
            slot.channel = slot.consumer = None
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.collect(socket_timeout=0.1)
        self._retry_at = time.monotonic() + self._backoff

    def _rescue_replies(self) -> list[tuple[bytes, bytes]]:
        """Each forgotten channel's BRPOP reply still unread in its socket, as (list,
        message): Redis pops a message as it answers, so when it is killed the message
        is only there (`bench/diag_brpop_kill.py`: every such reply readable after the
        kill, the lists empty after a restart from the append-only file)."""
        rescued = []
        for slot in self.slots.values():
            connection = getattr(slot.channel, "_in_poll", None)
            if connection is None or not hasattr(connection, "can_read"):
                continue  # no BRPOP in flight (or not Redis)
            with contextlib.suppress(Exception):  # nothing readable: nothing was popped
                if connection.can_read(timeout=0):
                    reply = connection.read_response()
                    if reply:
                        rescued.append((reply[0], reply[1]))
        return rescued

    def _put_back_rescued(self) -> None:
        """The rescued messages back at the taking end of their lists (BRPOP takes from
        the right: RPUSH), in one transaction; kept for the next round if Redis refuses."""
        import redis

        client = redis.Redis.from_url(self.broker_url, socket_timeout=SOCKET_TIMEOUT_S)
        try:
            with client.pipeline(transaction=True) as pipe:
                for name, message in self._rescued:
                    pipe.rpush(name, message)
                pipe.execute()
        except redis.RedisError as exc:
            n = len(self._rescued)
            log.warning(
                "%d messages received as the broker went away: not put back yet (%s)", n, exc
            )
            return
        finally:
            client.close()
        log.warning("%d messages received as the broker went away put back", len(self._rescued))
        self._rescued = []

    def _consume(self, slot: Slot) -> None:
        """Open `slot`'s channel (prefetch 1) and consume its device's queue."""
        from kombu import Consumer, Exchange, Queue

        name = queue_for(slot.key)
        if slot.channel is None:
            slot.channel = self.conn.channel()
            if hasattr(slot.channel, "brpop_timeout"):  # Redis
                slot.channel.brpop_timeout = BRPOP_WAIT_S
            self._qos(slot)
        self._take_back(slot.channel, name)
        q = Queue(name, Exchange(name), routing_key=name)  # as Celery declares a queue
        slot.consumer = Consumer(
            slot.channel,
            [q],
            callbacks=[lambda body, message, s=slot: self._received(s, body, message)],
            accept=["json"],
        )
        slot.consumer.consume()
        if not slot.said_ready:
            slot.said_ready = True
            log.info("%s@%s ready.", slot.key, self._host)  # as a Celery worker says it

    def _take_back(self, channel: Any, queue: str) -> None:
        """Put back on `queue` the deliveries left unacknowledged by a consumer before this
        process (its group or agent killed) or by this process's own lost connection, that
        no job or wait of this process holds. kombu's Redis transport keeps them in its
        unacked hash until the visibility timeout (hours), and the reconciler, finding them
        in the broker, would leave their jobs dispatched. A delivery is recorded there
        before its consumer sees it: when the connection breaks in between (Redis killed
        after it stored the record, before its reply), no one runs it (issue 44, a job
        stuck after a Redis restart). The hash is read once per connection, before that
        connection delivers anything. A copy another consumer still runs (an old group
        finishing its job after its agent died) is stale at its claim (jobs.claim)."""
        qos = getattr(channel, "qos", None)
        if not hasattr(qos, "restore_by_tag"):  # not Redis: nothing is kept aside
            return
        if self._left_behind is None:
            self._left_behind = left_behind(channel)
        tags = self._left_behind.pop(queue, [])
        mine = self._held_tags()
        for tag in tags:
            if tag not in mine:
                qos.restore_by_tag(tag)  # a no-op when it was acked meanwhile
                log.warning("%s: unacknowledged delivery %s put back", queue, tag)

    def _held_tags(self) -> set[str]:
        """Delivery tags of the messages this process holds: jobs under way, received and
        not started, waiting for their eta."""
        held = []
        for slot in self.slots.values():
            held += [m for m, _ in slot.ready] + [m for _, m, _ in slot.held]
            if slot.running is not None:
                held.append(slot.running.message)
        return {str(m.delivery_tag) for m in held}

    def _cancel(self, slot: Slot) -> None:
        consumer, slot.consumer = slot.consumer, None
        if consumer is not None:
            try:
                consumer.cancel()
            except Exception as exc:  # noqa: BLE001 - a dead channel consumes nothing anyway
                log.debug("cancel %s: %s", slot.key, exc)

    def _qos(self, slot: Slot) -> None:
        """Prefetch 1, plus one per retry this channel holds until its eta (Celery's way)."""
        if slot.channel is not None:
            waiting = sum(1 for _, m, _ in slot.held if m.channel is slot.channel)
            slot.channel.basic_qos(prefetch_size=0, prefetch_count=1 + waiting)

    def _update_consumers(self) -> None:
        now = time.monotonic()
        for slot in self.slots.values():
            want = slot.wanted and not self.stopping.is_set()
            if slot.consumer is not None and not want:
                self._cancel(slot)
            elif slot.consumer is None and want and slot.idle and now >= slot.consume_at:
                self._consume(slot)

    # -- messages and jobs --------------------------------------------------------------

    def _received(self, slot: Slot, body: Any, message: Any) -> None:
        try:
            job = decode(message.headers, body)
        except BadMessage as exc:
            log.error("%s: message dropped: %s", slot.key, exc)
            self._settle(message, ACK)
            return
        if job.eta is not None and job.eta > datetime.now(UTC):
            due = time.monotonic() + (job.eta - datetime.now(UTC)).total_seconds()
            slot.held.append((due, message, job))
            self._qos(slot)
            return
        slot.ready.append((message, job))

    def _release_due(self) -> None:
        now = time.monotonic()
        for slot in self.slots.values():
            due = [h for h in slot.held if h[0] <= now]
            if due:
                slot.held = [h for h in slot.held if h[0] > now]
                slot.ready.extend((m, j) for _, m, j in sorted(due, key=lambda h: h[0]))
                self._qos(slot)

    def _start_jobs(self) -> None:
        if self.stopping.is_set():  # warm shutdown: what waits goes back at the close
            return
        for slot in self.slots.values():
            if slot.running is not None or not slot.ready:
                continue
            message, job = slot.ready.popleft()
            run = slot.running = Running(message, job, time.monotonic())
            run.thread = threading.Thread(
                target=self._job, args=(slot.ctx, run), name=f"job:{slot.key}", daemon=True
            )
            run.thread.start()

    def _job(self, ctx: ConsumerContext, run: Running) -> None:
        """A job's thread: the task's body on the device's context."""
        from .tasks import DatabaseUnreachable, run_dispatches

        job = run.job
        verdict = ACK
        try:
            outcome = run_dispatches(ctx, job.dispatches)
            took = time.monotonic() - run.started
            log.info(
                "Task devicefarm.run_job[%s] succeeded in %.3fs: %r", job.task_id, took, outcome
            )
        except DatabaseUnreachable:
            verdict = REQUEUE
        except BaseException as exc:  # noqa: BLE001 - as a task that raised: logged, acked
            log.error("Task devicefarm.run_job[%s] raised %r", job.task_id, exc, exc_info=True)
        finally:
            run.verdict = verdict
            run.ended = True
            self.job_ended.set()

    def _settle(self, message: Any, verdict: str) -> None:
        """Ack (or requeue) `message`; a broker that refuses frees its credit all the same
        (worker_agent.ack_repair says why that matters)."""
        from kombu.transport.virtual.base import QoS as VirtualQoS

        try:
            if verdict == REQUEUE:
                message.reject(requeue=True)
            else:
                message.ack()
        except Exception as exc:  # noqa: BLE001 - the job is done either way (the database)
            log.warning("could not %s delivery %s: %s", verdict, message.delivery_tag, exc)
            qos = getattr(message.channel, "qos", None)
            if qos is not None and message.delivery_tag in getattr(qos, "_delivered", {}):
                with contextlib.suppress(Exception):
                    VirtualQoS.ack(qos, message.delivery_tag)

    def _reap(self) -> None:
        """Settle the messages of jobs that ended; a device found quarantined pauses."""
        for slot in self.slots.values():
            run = slot.running
            if run is None or run.thread is None or (not run.ended and run.thread.is_alive()):
                continue
            slot.running = None
            if not run.given_up:
                self._settle(run.message, run.verdict or ACK)
            if slot.ctx.quarantined and slot.wanted:
                self.pause(slot.key)  # its agent retries its canary

    def _limits(self) -> None:
        """Soft limit: raise in the job's runner block; hard limit: give the job up."""
        from celery.exceptions import SoftTimeLimitExceeded

        now = time.monotonic()
        for slot in self.slots.values():
            run = slot.running
            if run is None or run.given_up:
                continue
            age = now - run.started
            if age >= run.job.hard_limit_s:
                run.given_up = True
                slot.ctx.lease.release()  # its lease runs out: the reconciler moves it
                slot.ctx.lease.abandon_waiting()  # and its batch's others, not run here
                self._settle(run.message, ACK)
                log.error(
                    "%s: job %s past its hard time limit (%g s): given up; the device takes "
                    "no job until it returns",
                    slot.key,
                    run.job.job_id,
                    run.job.hard_limit_s,
                )
            elif age >= run.job.soft_limit_s and not run.soft_sent:
                run.soft_sent = slot.ctx.lease.interrupt(SoftTimeLimitExceeded)
                if run.soft_sent:
                    log.warning(
                        "%s: job %s past its soft time limit (%g s)",
                        slot.key,
                        run.job.job_id,
                        run.job.soft_limit_s,
                    )

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        """Consume until stopped and every job under way has ended."""
        while not (self.stopping.is_set() and all(s.running is None for s in self.slots.values())):
            self.job_ended.clear()  # before the reap: a job that ends later sets it again
            self._control()
            self._reap()
            self._limits()
            self._release_due()
            self._start_jobs()
            busy = any(s.running is not None for s in self.slots.values())
            wait = BUSY_WAIT_S if busy else IDLE_WAIT_S
            if not self._connect():
                time.sleep(wait)
                continue
            if self._rescued:
                self._put_back_rescued()
            try:
                self._update_consumers()
                if self._receiving():
                    self.conn.drain_events(timeout=self._until_due(wait))
                else:  # no device can take a message: a job's end is what comes next
                    self.job_ended.wait(self._until_due(wait))
            except TimeoutError:  # socket.timeout: nothing arrived
                pass
            except Exception as exc:  # noqa: BLE001 - any broker failure: reconnect
                self._lost(exc)
        self._close()

    def _receiving(self) -> bool:
        """Whether a device may receive a message now (consuming, its credit free: no job
        under way). When none may, the loop waits for a job's end instead of the broker
        and settles that job at once (draining the broker, it did so only after the wait,
        `BUSY_WAIT_S` per job: bench/bench_spine.py --group-devices)."""
        return any(
            s.consumer is not None and s.running is None and not s.ready
            for s in self.slots.values()
        )

    def _until_due(self, wait: float) -> float:
        """`wait`, shortened to the next staggered start or eta."""
        now = time.monotonic()
        due = [s.consume_at for s in self.slots.values() if s.wanted and s.consumer is None]
        due += [h[0] for s in self.slots.values() for h in s.held]
        later = [d - now for d in due if d > now]
        return max(0.001, min([wait, *later]))

    def _close(self) -> None:
        """Close every channel (what was received and not started goes back to its queue)
        within CLOSE_DEADLINE_S. A broker that stopped answering would hold the close in
        kombu's restore for ever (deaf to SIGTERM: the stop was asked already); past the
        deadline those deliveries stay unacknowledged for the next group's `_take_back`."""
        closer = threading.Thread(target=self._close_broker, name="close", daemon=True)
        closer.start()  # the main thread touches kombu no more
        closer.join(CLOSE_DEADLINE_S)
        if closer.is_alive():
            log.warning(
                "the broker did not answer the shutdown within %g s: what was received and "
                "not started stays unacknowledged (the next group puts it back)",
                CLOSE_DEADLINE_S,
            )
            for slot in self.slots.values():
                if slot.channel is not None:  # nor restored at the interpreter's exit
                    slot.channel.do_restore = False
        self.shared.engine.dispose()
        self.shared.statements_engine.dispose()

    def _close_broker(self) -> None:
        if self.conn is not None:
            self._unblock()
            self._put_back_orphans()
            for slot in self.slots.values():
                if slot.channel is not None:
                    with contextlib.suppress(Exception):
                        slot.channel.close()
            with contextlib.suppress(Exception):
                self.conn.release()
        self.shared.dispatcher.close()

    def _put_back_orphans(self) -> None:
        """Put back what was received on a lost connection and not started: its channel,
        forgotten, restores nothing at its close."""
        live = {id(s.channel) for s in self.slots.values() if s.channel is not None}
        for slot in self.slots.values():
            qos = getattr(slot.channel, "qos", None)
            if not hasattr(qos, "restore_by_tag"):
                continue
            waiting = [m for m, _ in slot.ready] + [m for _, m, _ in slot.held]
            for message in waiting:
                if id(message.channel) not in live:
                    with contextlib.suppress(Exception):
                        qos.restore_by_tag(message.delivery_tag)

    def _unblock(self) -> None:
        """End the BRPOPs in flight at once (CLIENT UNBLOCK: each answers nil), so that
        closing a channel does not wait up to BRPOP_WAIT_S for its reply."""
        waiting = set()
        for slot in self.slots.values():
            sock = getattr(getattr(slot.channel, "_in_poll", None), "_sock", None)
            with contextlib.suppress(OSError, AttributeError):
                host, port = sock.getsockname()[:2]
                waiting.add(f"{host}:{port}")
        if not waiting:
            return
        import redis

        client = redis.Redis.from_url(self.broker_url, socket_timeout=1, socket_connect_timeout=1)
        try:
            ids = [c["id"] for c in client.client_list() if c.get("addr") in waiting]
            with client.pipeline(transaction=False) as pipe:
                for client_id in ids:
                    pipe.client_unblock(client_id)
                pipe.execute()
        except redis.RedisError as exc:  # the close reads each reply instead (or times out)
            log.debug("unblock: %s", exc)
        finally:
            client.close()


def left_behind(channel: Any) -> dict[str, list[str]]:
    """Delivery tags in kombu's Redis unacked hash, by queue (the routing key each was
    delivered from: a device's queue)."""
    import json

    out: dict[str, list[str]] = {}
    for tag, raw in channel.client.hgetall(channel.unacked_key).items():
        try:
            _, _, routing_key = json.loads(raw)
        except (ValueError, TypeError):
            continue
        key = tag.decode() if isinstance(tag, bytes) else tag
        out.setdefault(str(routing_key), []).append(key)
    return out


def _read_commands(group: DeviceGroup) -> None:
    for line in sys.stdin:
        group.commands.put(line)
    group.commands.put(None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m worker_agent.group")
    p.add_argument("--db", required=True)
    p.add_argument("--broker", required=True)
    p.add_argument("--loglevel", default="WARNING")
    p.add_argument("--cpus", default="", help="run only on these CPUs (e.g. 0-3,8)")
    args = p.parse_args(argv)
    if args.cpus:  # first: every thread started later inherits it
        from .cpu_sets import parse_list, pin

        pin(parse_list(args.cpus))
    from billiard.util import set_pdeathsig

    with contextlib.suppress(OSError):  # Linux only
        set_pdeathsig(signal.SIGTERM)  # the agent died: finish the jobs, then stop
    logging.basicConfig(level=args.loglevel, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*superuser privileges.*")
    prepare_broker(args.broker)
    group = DeviceGroup(args.db, args.broker)
    signal.signal(signal.SIGTERM, lambda *_: group.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: group.stopping.set())
    threading.Thread(target=_read_commands, args=(group,), name="control", daemon=True).start()
    group.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
