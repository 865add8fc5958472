"""How many PostgreSQL connections a farm process keeps, and whether a transaction-mode
pooler (PgBouncer) stands between the farm and the server (docs/deploy.md, "Many devices,
one PostgreSQL").

- `DEVICEFARM_DB_POOL`: connections a process (agent, reconciler, API, dashboard) keeps
  open between uses; a burst opens up to `BURST` more, closed as they are given back. A
  device's consumer keeps none of these: it holds one connection while its queue has jobs
  and none once it runs dry (worker_agent.consumer).
- `DEVICEFARM_DB_POOLER=transaction`: a transaction-mode pooler is in front, so nothing may
  rely on a server session outliving its transaction. The farm keeps no session state
  anyway (its locks are transaction-scoped, it sets no session settings on a shared
  connection, it prepares no statements on the server); this switch only drops what a
  pooler would refuse: the workers' relaxed commits, sent as a startup option
  (farm_core.database.make_engine), and psycopg 3's automatic prepared statements.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from delegate_runtime.errors import UsageError

ENV_POOL = "DEVICEFARM_DB_POOL"
ENV_POOLER = "DEVICEFARM_DB_POOLER"
#: Connections opened past the pool for a burst of concurrent uses (closed when given back).
BURST = 8
#: The poolers `DEVICEFARM_DB_POOLER` names: none (direct, or a session-mode pooler, which
#: keeps a server session per client) and transaction-mode.
POOLERS = ("none", "session", "transaction")


@dataclass(frozen=True)
class DbPool:
    """A process's database connection settings, from the environment."""

    size: int = 2  #: connections kept open between uses
    pooler: str = "none"  #: "transaction" behind a transaction-mode pooler

    @property
    def transaction_pooler(self) -> bool:
        return self.pooler == "transaction"

    @classmethod
    def from_env(cls) -> DbPool:
        """Defaults, overridden by `DEVICEFARM_DB_POOL` and `DEVICEFARM_DB_POOLER`."""
        raw = os.environ.get(ENV_POOL, "").strip()
        size = cls.size
        if raw:
            try:
                size = int(raw)
            except ValueError:
                raise UsageError(f"{ENV_POOL}={raw[:40]!r} is not a whole number") from None
            if not 0 <= size <= 1000:
                raise UsageError(f"{ENV_POOL} must be from 0 to 1000, not {size}")
        pooler = os.environ.get(ENV_POOLER, "").strip().lower() or cls.pooler
        if pooler not in POOLERS:
            raise UsageError(f"{ENV_POOLER}={pooler[:40]!r}: choose one of {', '.join(POOLERS)}")
        return cls(size, pooler)
