"""Per-device decisions for one model: supported (with the best options), unsupported
(with the reason) or unknown (not measured enough), from aggregated evidence.

A list judges one delegate's configurations (`judged`): the GPU list its presets
(`GPU_CONFIGS`), another delegate's list every canonical configuration of that delegate
(e.g. several NNAPI accelerators), each with the error limit of its precision. A
configuration is judged in this order; the first failed check is its reason: failed
results (crashed: the tool or the delegate failed by the device's fault, see `causes`;
error too large: wrong outputs by the inference diff) → too few runs (no data) → ops fell
back (with `require_full_delegation`) → unstable (latency spread) → slower than CPU
(speed-up below the threshold). The device is supported when a configuration passes (the
fastest one is the best option), unsupported when every configuration with data failed a
check, and unknown otherwise.

An unsupported verdict overrides LiteRT's shipped answer in a merged list, so it needs
repeated evidence: MIN_DEVICE_EVIDENCE independent results behind it, and for failed
results no passing result on the same facts (failures beside a pass are undecided).
Infrastructure failures (timeouts, a lost phone, adb, our bugs) are never evidence.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from farm_core import metrics
from farm_core.configs import CONFIGS, stored_config
from farm_core.delegates import DELEGATES

from .tree import GPU

SUPPORTED, UNSUPPORTED, UNKNOWN = "supported", "unsupported", "unknown"
STATUSES = (SUPPORTED, UNSUPPORTED, UNKNOWN)

#: Reason codes, most severe first (an unsupported device reports its most severe).
CRASHED = "crashed"
FELL_BACK = "ops_fell_back"
UNSTABLE = "unstable"
ERROR_TOO_LARGE = "error_too_large"
SLOWER_THAN_CPU = "slower_than_cpu"
REASONS = (CRASHED, FELL_BACK, UNSTABLE, ERROR_TOO_LARGE, SLOWER_THAN_CPU)
NOT_MEASURED = "not_measured"

#: GPU configurations and their delegate precision.
GPU_CONFIGS = {c.name: c.precision for c in CONFIGS.values() if c.use_gpu}
#: Delegates a list can be exported for: the GPU, then every other delegate but the CPU's.
LIST_DELEGATES = (GPU, *(d for d in DELEGATES if d not in (GPU, "cpu")))
#: Inference-diff limits (mean absolute error, worst output) when --max-error is not given.
DEFAULT_MAX_ERROR = {"fp32": 1e-3, "fp16": 1e-2}
#: Independent results (jobs) an unsupported verdict needs: one may be chance.
MIN_DEVICE_EVIDENCE = 2


@dataclass(frozen=True)
class Thresholds:
    """What a configuration must meet to be allowed."""

    min_speedup: float = 1.2  #: CPU avg latency / GPU avg latency
    max_error: float | None = None  #: None: DEFAULT_MAX_ERROR per precision
    require_full_delegation: bool = False
    min_runs: int = 1  #: successful results needed per configuration
    max_cv: float = 0.25  #: relative std dev of avg latency across results
    max_run_cv: float = 0.5  #: std / avg within one benchmark run

    def error_limit(self, precision: str) -> float:
        return self.max_error if self.max_error is not None else DEFAULT_MAX_ERROR[precision]


@dataclass
class ConfigStats:
    """One configuration's results on one device (facts), aggregated."""

    config: str
    ok: int = 0
    failed: int = 0  #: independent results failed by the device's fault (causes.py)
    timed_out: int = 0  #: results that timed out (never evidence)
    error: str = ""  #: one device-caused failure's error
    mean_us: float | None = None  #: mean of the successful runs' avg latency
    cv: float | None = None  #: relative std dev of those
    worst_run_cv: float | None = None  #: max std/avg within a run
    max_error: float | None = None  #: worst inference-diff avg error (None: not measured)
    fell_back: int | None = None  #: most ops left to the CPU in a successful run
    total_ops: int | None = None
    enable_quant: bool = True
    infra: int = 0  #: other failed results: the farm's trouble (never evidence)
    infra_error: str = ""  #: one infrastructure failure's error
    min_error: float | None = None  #: best inference-diff avg error of a successful run
    diffs: int = 0  #: successful runs with an inference diff
    set_aside: int = 0  #: successful results under other configuration records, not counted


@dataclass
class Evidence:
    """Everything measured for one model on one device (as its facts were)."""

    configs: dict[str, ConfigStats] = field(default_factory=dict)
    cpu_us: float | None = None  #: CPU baseline (mean avg latency)
    no_cpu: str = "no CPU baseline to compare with"  #: why cpu_us is None, when it is

    @property
    def set_aside(self) -> int:
        """Successful results measured under other configuration records, not counted."""
        return sum(s.set_aside for s in self.configs.values())


@dataclass(frozen=True)
class Verdict:
    """One configuration judged: ok True/False, or None when there is no data."""

    config: str
    ok: bool | None
    code: str
    reason: str
    speedup: float | None = None


@dataclass(frozen=True)
class Decision:
    """The list's answer for one device: status, reason code/text, best options."""

    status: str
    code: str = ""
    reason: str = ""
    config: str = ""
    precision: str = ""
    enable_quant: bool | None = None
    speedup: float | None = None


@functools.cache
def judged(config: str, delegate: str = GPU) -> str | None:
    """The precision of `config` when the list of `delegate` judges it, else None: the GPU
    list its presets, another delegate's list each canonical configuration of it."""
    if delegate == GPU:
        return GPU_CONFIGS.get(config)
    try:
        c = stored_config(config)
    except KeyError:  # a spelling no configuration has (never stored by the farm)
        return None
    return c.precision if c.delegate == delegate else None


@functools.cache
def _precision(config: str) -> str:
    """A judged configuration's precision (its error limit follows it)."""
    return GPU_CONFIGS.get(config) or stored_config(config).precision


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:200] if (text or "").strip() else ""


def _wrong(stats: ConfigStats, limit: float) -> tuple[int, bool]:
    """(successful results with outputs beyond `limit`, whether one is within it); when
    both kinds exist the count is a lower bound (1)."""

    def beyond(x: float | None) -> bool:
        return x is not None and (not math.isfinite(x) or x > limit)

    if not beyond(stats.max_error):
        return 0, stats.diffs > 0
    if stats.min_error is None or beyond(stats.min_error):
        return max(stats.diffs, 1), False
    return 1, True


def _failures(stats: ConfigStats, th: Thresholds) -> Verdict | None:
    """The verdict from failed results (device-caused failures and wrong outputs), or
    None when there are none."""
    c = stats.config
    limit = th.error_limit(_precision(c))
    wrong, right = _wrong(stats, limit)
    bad = stats.failed + wrong
    if not bad:
        return None
    err = _first_line(stats.error)
    parts = []
    if stats.failed:
        crashed = f"crashed in {stats.failed} of {stats.failed + stats.ok} results"
        parts.append(f"{crashed} ({err})" if err else crashed)
    if wrong:
        some = "some" if right else f"{wrong} of {stats.ok}"
        parts.append(f"error {stats.max_error:.3g} above {limit:.3g} in {some} results")
    why = f"{c}: " + "; ".join(parts)
    mixed = bool(wrong and right)  # outputs beyond the limit in some results only
    if mixed or stats.ok > wrong:  # a passing result on the same facts outweighs them
        passed = "others" if mixed else str(stats.ok - wrong)
        return Verdict(c, None, NOT_MEASURED, f"{why}, passed in {passed}: undecided")
    if bad < MIN_DEVICE_EVIDENCE:
        return Verdict(
            c,
            None,
            NOT_MEASURED,
            f"{why}: {bad} device-caused failure{'s' if bad > 1 else ''}, "
            f"{MIN_DEVICE_EVIDENCE} needed before it counts",
        )
    return Verdict(c, False, CRASHED if stats.failed else ERROR_TOO_LARGE, why)


def _repeated(stats: ConfigStats, v: Verdict) -> Verdict:
    """An unsupported verdict from successful results needs MIN_DEVICE_EVIDENCE of them."""
    if v.ok is False and stats.ok < MIN_DEVICE_EVIDENCE:
        return Verdict(
            v.config,
            None,
            NOT_MEASURED,
            f"{v.reason} in {stats.ok} result; {MIN_DEVICE_EVIDENCE} needed before it counts",
            v.speedup,
        )
    return v


def judge(
    stats: ConfigStats,
    cpu_us: float | None,
    th: Thresholds,
    no_cpu: str = "no CPU baseline to compare with",
) -> Verdict:
    """One configuration against the thresholds (`no_cpu`: why cpu_us is None)."""
    failed = _failures(stats, th)
    return failed if failed is not None else _repeated(stats, _measured(stats, cpu_us, th, no_cpu))


def _measured(stats: ConfigStats, cpu_us: float | None, th: Thresholds, no_cpu: str) -> Verdict:
    """The checks on the successful results (there are no failed ones)."""
    c = stats.config
    infra = stats.infra + stats.timed_out
    if not stats.ok and infra:
        err = _first_line(stats.infra_error)
        plural = "s" if infra > 1 else ""
        why = f"{infra} infrastructure failure{plural}" + (f" ({err})" if err else "")
        return Verdict(c, None, NOT_MEASURED, f"{c}: {why}, not evidence")
    if stats.ok < max(th.min_runs, 1) or stats.mean_us is None:
        return Verdict(c, None, NOT_MEASURED, f"{c}: {stats.ok} of {th.min_runs} runs needed")
    if th.require_full_delegation and stats.fell_back:
        total = f" of {stats.total_ops}" if stats.total_ops else ""
        return Verdict(c, False, FELL_BACK, f"{c}: {stats.fell_back}{total} ops fell back to CPU")
    if stats.cv is not None and stats.cv > th.max_cv:
        return Verdict(c, False, UNSTABLE, f"{c}: latency varies {stats.cv:.0%} across runs")
    if stats.worst_run_cv is not None and stats.worst_run_cv > th.max_run_cv:
        return Verdict(
            c, False, UNSTABLE, f"{c}: latency varies {stats.worst_run_cv:.0%} within a run"
        )
    if stats.max_error is None:
        return Verdict(c, None, NOT_MEASURED, f"{c}: no inference diff measured")
    speedup = metrics.speedup(cpu_us, stats.mean_us)
    if th.min_speedup > 0:
        if speedup is None:
            return Verdict(c, None, NOT_MEASURED, f"{c}: {no_cpu}")
        if speedup < th.min_speedup:
            return Verdict(
                c,
                False,
                SLOWER_THAN_CPU,
                f"{c}: {speedup:.2f}x over CPU, needs {th.min_speedup:.2f}x",
                speedup,
            )
    return Verdict(c, True, "", "", speedup)


def decide(evidence: Evidence, th: Thresholds, delegate: str = GPU) -> Decision:
    """The decision for one device from its evidence, on the configurations of `delegate`."""
    verdicts = [
        judge(s, evidence.cpu_us, th, evidence.no_cpu)
        for c, s in sorted(evidence.configs.items())
        if judged(c, delegate)
    ]
    good = [v for v in verdicts if v.ok]
    if good:
        stats = evidence.configs
        best = min(
            good, key=lambda v: (stats[v.config].mean_us or math.inf, v.config != "gpu-fp32")
        )
        return Decision(
            SUPPORTED,
            config=best.config,
            precision=_precision(best.config),
            enable_quant=stats[best.config].enable_quant if delegate == GPU else None,
            speedup=best.speedup,
        )
    bad = [v for v in verdicts if v.ok is False]
    if bad:
        code = min((v.code for v in bad), key=REASONS.index)
        return Decision(UNSUPPORTED, code, "; ".join(v.reason for v in bad))
    if not verdicts:
        what = "GPU" if delegate == GPU else delegate
        return Decision(UNKNOWN, NOT_MEASURED, f"no {what} configuration measured")
    return Decision(UNKNOWN, NOT_MEASURED, "; ".join(v.reason for v in verdicts))


def merge(decisions: Iterable[Decision], why: str = "") -> Decision:
    """One decision for devices the list cannot tell apart: the most conservative."""
    ds = list(decisions)
    if not ds:
        return Decision(UNKNOWN, NOT_MEASURED, "not measured")
    if len(ds) == 1:
        return ds[0]
    statuses = {d.status for d in ds}
    note = f" ({why})" if why else ""
    if statuses == {SUPPORTED}:
        fp32 = [d for d in ds if d.precision == "fp32"]
        base = fp32[0] if fp32 else ds[0]
        speedups = [d.speedup for d in ds if d.speedup is not None]
        return Decision(
            SUPPORTED,
            config=base.config,
            precision=base.precision,
            enable_quant=None
            if any(d.enable_quant is None for d in ds)  # not a GPU list
            else all(d.enable_quant for d in ds),
            speedup=min(speedups) if speedups else None,
        )
    if UNSUPPORTED in statuses:
        bad = [d for d in ds if d.status == UNSUPPORTED]
        code = min((d.code for d in bad), key=lambda c: REASONS.index(c) if c in REASONS else 99)
        return Decision(UNSUPPORTED, code, bad[0].reason + note)
    return Decision(UNKNOWN, NOT_MEASURED, "not measured everywhere" + note)


def summary(decisions: Mapping[str, Decision]) -> dict[str, int]:
    """Count of each status."""
    out = dict.fromkeys(STATUSES, 0)
    for d in decisions.values():
        out[d.status] += 1
    return out
