"""Device reservations: a user holds a named device from `starts_at` to `ends_at` (naive
UTC), for their project or for themselves alone. While a reservation is on, the device
starts only the holder's jobs (its project's, or its user's); the jobs of others wait,
saying until when, or move to another device of the same hardware
(orchestrator.reconciler). Jobs already running when a reservation begins run to their
end. Reservations of one device never overlap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import Connection, insert, select, update

from delegate_runtime.errors import JobError

from .schema import Device, Reservation, utcnow
from .text_safety import string_errors

#: The longest reservation: a typo must not hold a device for a year.
MAX_DAYS = 31
#: The most characters of a reservation's reason.
REASON_CHARS = 500


@dataclass(frozen=True)
class Held:
    """One reservation as the scheduler and `reservations list` see it."""

    id: int
    device_key: str
    user: str
    project: str
    starts_at: datetime
    ends_at: datetime
    reason: str = ""
    cancelled_at: datetime | None = None

    def holds(self, project: str, owner: str) -> bool:
        """Whether a job of `project` submitted by `owner` is the holder's: its project's
        (a reservation with no project holds for its user alone) or its user's."""
        return (bool(self.project) and project == self.project) or (
            bool(owner) and owner == self.user
        )

    def holder(self) -> str:
        who = self.user or "?"
        return f"{who} (project {self.project})" if self.project else who

    def wait_reason(self) -> str:
        """What a job of someone else says while it waits for this device."""
        return f"device {self.device_key} reserved by {self.holder()} until {when(self.ends_at)}"


def when(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC")


_COLUMNS = (
    Reservation.id,
    Reservation.device_key,
    Reservation.user,
    Reservation.project,
    Reservation.starts_at,
    Reservation.ends_at,
    Reservation.reason,
    Reservation.cancelled_at,
)


def reserve(
    conn: Connection,
    device_key: str,
    user: str,
    project: str,
    starts_at: datetime,
    ends_at: datetime,
    reason: str = "",
    now: datetime | None = None,
) -> Held:
    """Hold `device_key` for `project` (and `user`) from `starts_at` to `ends_at`; JobError
    saying why not (an unknown device, a bad window, an overlap with another reservation)."""
    now = now or utcnow()
    errors = string_errors("the reason", reason, REASON_CHARS)
    errors += string_errors("the user", user, 64) + string_errors("the project", project, 64)
    if not (user.strip() or project.strip()):
        errors.append("a reservation needs a user or a project to hold it")
    if ends_at <= starts_at:
        errors.append(f"it ends ({when(ends_at)}) before it starts ({when(starts_at)})")
    elif ends_at <= now:
        errors.append(f"it ends in the past ({when(ends_at)}; now {when(now)})")
    elif ends_at - starts_at > timedelta(days=MAX_DAYS):
        errors.append(f"it is longer than {MAX_DAYS} days")
    if errors:
        raise JobError("; ".join(errors))
    # one reservation of a device at a time: its row locked (SQLite: BEGIN IMMEDIATE)
    device = conn.execute(
        select(Device.key).where(Device.key == device_key).with_for_update()
    ).first()
    if device is None:
        known = ", ".join(conn.execute(select(Device.key).order_by(Device.key)).scalars())
        raise JobError(f"no device {device_key} (devices: {known or 'none registered'})")
    clash = conn.execute(
        select(*_COLUMNS)
        .where(
            Reservation.device_key == device_key,
            Reservation.cancelled_at.is_(None),
            Reservation.starts_at < ends_at,
            Reservation.ends_at > starts_at,
        )
        .order_by(Reservation.starts_at)
    ).first()
    if clash is not None:
        other = Held(*clash)
        raise JobError(
            f"{device_key} is already reserved from {when(other.starts_at)} until "
            f"{when(other.ends_at)} by {other.holder()} (reservation {other.id}): "
            "reservations of a device may not overlap"
        )
    rid = conn.execute(
        insert(Reservation)
        .values(
            device_key=device_key,
            user=user,
            project=project,
            starts_at=starts_at,
            ends_at=ends_at,
            reason=reason,
            created_at=now,
        )
        .returning(Reservation.id)
    ).scalar_one()
    return Held(rid, device_key, user, project, starts_at, ends_at, reason)


def cancel(conn: Connection, reservation_id: int, now: datetime | None = None) -> Held:
    """End a reservation now (one not yet begun is dropped); JobError when there is none
    to cancel."""
    now = now or utcnow()
    row = conn.execute(select(*_COLUMNS).where(Reservation.id == reservation_id)).first()
    if row is None:
        raise JobError(f"no reservation {reservation_id} (`devicefarm reservations list`)")
    held = Held(*row)
    if held.cancelled_at is not None:
        raise JobError(f"reservation {reservation_id} was cancelled at {when(held.cancelled_at)}")
    if held.ends_at <= now:
        raise JobError(f"reservation {reservation_id} ended at {when(held.ends_at)}")
    conn.execute(
        update(Reservation).where(Reservation.id == reservation_id).values(cancelled_at=now)
    )
    return replace(held, cancelled_at=now)


def listing(conn: Connection, now: datetime | None = None, ended: bool = False) -> list[Held]:
    """Reservations not cancelled and not over (with `ended`: every one), by start."""
    now = now or utcnow()
    q = select(*_COLUMNS).order_by(Reservation.starts_at, Reservation.id)
    if not ended:
        q = q.where(Reservation.cancelled_at.is_(None), Reservation.ends_at > now)
    return [Held(*r) for r in conn.execute(q)]


def active_on(
    conn: Connection, device_keys: Iterable[str] | None, now: datetime
) -> dict[str, Held]:
    """device key -> the reservation on at `now` (of `device_keys`, or of every device)."""
    q = select(*_COLUMNS).where(
        Reservation.cancelled_at.is_(None),
        Reservation.starts_at <= now,
        Reservation.ends_at > now,
    )
    if device_keys is not None:
        keys = list(device_keys)
        if not keys:
            return {}
        q = q.where(Reservation.device_key.in_(keys))
    return {r.device_key: Held(*r) for r in conn.execute(q)}
