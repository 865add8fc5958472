"""The evidence query: results aggregated in the database, one row per model, device,
configuration, facts-as-they-ran and configuration record (`config_records`).

At 1,000 devices and 100,000 results the plain form (GROUP BY the facts JSON, a
count(DISTINCT job) beside it) sorted every wide row and spilled to disk: 2-4 s. This
form is hash-aggregated in two steps and never hashes or sorts the facts:

- Facts: each device's results nearly always ran with one set of facts, so each result's
  facts are compared, byte for byte, with those of one result of the device (its
  reference). Equal ones are grouped under the reference's id, read once per device
  afterwards (`facts_by_id`); the rare others (a driver update) are grouped by their own
  value. Byte-equal implies equal, so no two different facts ever share a group.
- Independent device-caused failures (one per job): the inner step groups by the job of
  such a failure as well (NULL for every other result), the outer step counts those groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Boolean,
    Connection,
    Float,
    Integer,
    and_,
    case,
    cast,
    func,
    not_,
    null,
    or_,
    select,
    text,
    type_coerce,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import aliased
from sqlalchemy.sql.functions import FunctionElement

from farm_core.schema import CANCELLED, FAILED, SUCCEEDED, TIMED_OUT, Device, Result

from .causes import device_caused
from .config_records import MEASURED_UNDER, NEWEST_OK

#: PostgreSQL's memory for the query's hash tables (its default, 4 MB, made it sort).
WORK_MEM = "128MB"


class same_bytes(FunctionElement):
    """SQL: two stored values are byte-identical (which implies equal): PostgreSQL
    compares their images (`record_image_eq`, a memcmp) instead of parsing JSON; SQLite
    stores JSON as text, which `=` compares as it is."""

    type = Boolean()
    name = "same_bytes"
    inherit_cache = True


@compiles(same_bytes)
def _same_bytes(element: same_bytes, compiler: Any, **kw: Any) -> str:
    a, b = (compiler.process(c, **kw) for c in element.clauses)
    return f"({a} = {b})"


@compiles(same_bytes, "postgresql")
def _same_bytes_pg(element: same_bytes, compiler: Any, **kw: Any) -> str:
    a, b = (compiler.process(c, **kw) for c in element.clauses)
    return f"record_image_eq(ROW({a}), ROW({b}))"


def _references() -> Any:
    """Per registered device, one of its results (any: it only names the facts most of the
    device's results share) and that result's facts."""
    one = select(Result.id).where(Result.device_key == Device.key).limit(1).scalar_subquery()
    keyed = select(Device.key.label("device_key"), one.label("ref_id")).subquery("keyed")
    ref = aliased(Result, name="ref_result")
    return (
        select(keyed.c.device_key, keyed.c.ref_id, ref.device_facts.label("facts"))
        .join(ref, ref.id == keyed.c.ref_id)
        .subquery("ref")
    )


def evidence_query(models: Sequence[str] | None = None, evidence: Any = None) -> Any:
    """Results (not cancelled; of `models`, and meeting `evidence`, a condition on Result,
    when given) aggregated per model, device, configuration, facts-as-they-ran and the
    configuration record their figures were measured under. A row's facts are the stored
    facts of result `facts_of`, or `device_facts` when that is NULL (read_rows joins them)."""
    ok = Result.outcome == SUCCEEDED
    device = device_caused()
    infra = and_(Result.outcome == FAILED, not_(device))
    diff = and_(ok, Result.max_avg_error.is_not(None))
    std = Result.benchmark["std_us"].as_float()
    quant = cast(Result.benchmark["options"]["enable_quant"].as_boolean(), Integer)
    ref = _references()
    same = same_bytes(Result.device_facts, ref.c.facts)
    keys = (
        Result.model_sha256.label("model"),
        Result.device_key.label("device_key"),
        Result.config.label("config"),
        # NULL: the facts of the device's reference (facts_of)
        type_coerce(
            case((same, null()), else_=Result.device_facts), Result.device_facts.type
        ).label("device_facts"),
        MEASURED_UNDER.label("measured_under"),
    )
    inner = (
        select(
            *keys,
            case((device, Result.job_id)).label("failed_job"),
            func.max(ref.c.ref_id).label("facts_of"),
            NEWEST_OK.label("newest_ok"),
            func.sum(case((ok, 1), else_=0)).label("ok"),
            func.sum(case((Result.outcome == TIMED_OUT, 1), else_=0)).label("timed_out"),
            func.sum(case((infra, 1), else_=0)).label("infra"),
            func.max(case((device, Result.error))).label("error"),
            func.max(case((or_(infra, Result.outcome == TIMED_OUT), Result.error))).label(
                "infra_error"
            ),
            func.avg(case((ok, Result.avg_us))).label("mean_us"),
            func.avg(case((ok, Result.avg_us * Result.avg_us))).label("mean_sq"),
            func.max(case((ok, std / func.nullif(Result.avg_us, 0.0, type_=Float)))).label(
                "worst_run_cv"
            ),
            func.max(case((ok, Result.max_avg_error))).label("max_error"),
            func.min(case((ok, Result.max_avg_error))).label("min_error"),
            func.sum(case((diff, 1), else_=0)).label("diffs"),
            func.max(case((ok, Result.total_ops - Result.delegated_ops))).label("fell_back"),
            func.max(Result.total_ops).label("total_ops"),
            func.min(case((ok, quant))).label("quant"),
        )
        .select_from(Result)
        .outerjoin(ref, ref.c.device_key == Result.device_key)
        .where(Result.outcome != CANCELLED)
        .group_by(*keys, "failed_job")
    )
    if models is not None:
        inner = inner.where(Result.model_sha256.in_(list(models)))
    if evidence is not None:
        inner = inner.where(evidence)
    g = inner.subquery("per_job")
    outer_keys = [g.c[k.name] for k in keys]
    return (
        select(
            *outer_keys,
            func.max(g.c.facts_of).label("facts_of"),
            # its own facts (not the reference's), even a JSON null
            (func.count(g.c.device_facts) > 0).label("own_facts"),
            func.max(g.c.newest_ok).label("newest_ok"),
            func.sum(g.c.ok).label("ok"),
            func.count(g.c.failed_job).label("failed"),  # one per job
            func.sum(g.c.timed_out).label("timed_out"),
            func.sum(g.c.infra).label("infra"),
            func.max(g.c.error).label("error"),
            func.max(g.c.infra_error).label("infra_error"),
            # a successful result is no failure: all of a group's figures are in its one
            # per-job row without a failed job
            func.max(g.c.mean_us).label("mean_us"),
            func.max(g.c.mean_sq).label("mean_sq"),
            func.max(g.c.worst_run_cv).label("worst_run_cv"),
            func.max(g.c.max_error).label("max_error"),
            func.min(g.c.min_error).label("min_error"),
            func.sum(g.c.diffs).label("diffs"),
            func.max(g.c.fell_back).label("fell_back"),
            func.max(g.c.total_ops).label("total_ops"),
            func.min(g.c.quant).label("quant"),
        )
        .group_by(*outer_keys)
        .order_by(g.c.model, g.c.device_key, g.c.config, g.c.measured_under)
    )


def read_rows(
    conn: Connection, models: Sequence[str] | None = None, evidence: Any = None
) -> list[dict[str, Any]]:
    """The evidence query's rows, each with its `device_facts` (one dict per distinct facts,
    shared by the rows that ran with them: callers must not change it)."""
    if conn.dialect.name == "postgresql":  # hash the groups in memory (~1 KB a group)
        conn.execute(text(f"SET LOCAL work_mem = '{WORK_MEM}'"))
    result = conn.execute(evidence_query(models, evidence))
    names = list(result.keys())
    rows = [dict(zip(names, r, strict=True)) for r in result]
    facts = facts_by_id(conn, {r["facts_of"] for r in rows if not r["own_facts"]})
    for r in rows:
        ref, own = r.pop("facts_of"), r.pop("own_facts")
        if not own:
            r["device_facts"] = facts[ref]
    return rows


def facts_by_id(conn: Connection, ids: set[int]) -> dict[int, dict[str, Any]]:
    """The stored facts of these results, by result id."""
    if not ids:
        return {}
    q = select(Result.id, Result.device_facts).where(Result.id.in_(sorted(ids)))
    return {i: f for i, f in conn.execute(q)}
