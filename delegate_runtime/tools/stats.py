"""TFLite's run statistics (`tsl::StatWithPercentiles<int64_t>`), reproduced exactly.

Values are integer microseconds. `avg` is a double; `std` is the population standard
deviation truncated to an integer, as the C++ template computes it in the value type;
percentiles are the element at index `count * p // 100` of the sorted values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field


def cpp_double(value: float) -> str:
    """A double as C++ `std::ostream` prints it by default (`%g`, 6 significant digits)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:g}"


@dataclass
class Stat:
    """Accumulated statistics of integer samples (microseconds)."""

    values: list[int] = field(default_factory=list)
    _sum: int = 0
    _squared_sum: float = 0.0

    @classmethod
    def of(cls, values: Iterable[int]) -> Stat:
        stat = cls()
        for v in values:
            stat.add(v)
        return stat

    def add(self, value: int) -> None:
        value = int(value)
        self.values.append(value)
        self._sum += value
        self._squared_sum += float(value) * value

    @property
    def count(self) -> int:
        return len(self.values)

    @property
    def empty(self) -> bool:
        return not self.values

    @property
    def first(self) -> int:
        return self.values[0] if self.values else 0

    @property
    def newest(self) -> int:
        return self.values[-1] if self.values else 0

    @property
    def min(self) -> int:
        return min(self.values) if self.values else 0

    @property
    def max(self) -> int:
        return max(self.values) if self.values else 0

    @property
    def sum(self) -> int:
        return self._sum

    @property
    def all_same(self) -> bool:
        return self.empty or self.min == self.max

    @property
    def avg(self) -> float:
        return self._sum / self.count if self.values else math.nan

    @property
    def std(self) -> int:
        """Population standard deviation, truncated as TFLite's int64 Stat does."""
        if self.all_same:
            return 0
        variance = self._squared_sum / self.count - self.avg * self.avg
        return int(math.sqrt(max(int(variance), 0)))

    def percentile(self, p: int) -> int:
        """TFLite's percentile: the element at index count*p//100 of the sorted values."""
        if not self.values:
            return 0
        ordered = sorted(self.values)
        return ordered[min(len(ordered) * p // 100, len(ordered) - 1)]

    def format(self, percentiles: bool = True) -> str:
        """The `count=...` text of `Stat::OutputToStream` (with percentiles by default)."""
        if self.empty:
            text = "count=0"
        elif self.all_same:
            text = f"count={self.count} curr={self.newest}"
            if self.count > 1:
                text += "(all same)"
        else:
            text = (
                f"count={self.count} first={self.first} curr={self.newest} min={self.min} "
                f"max={self.max} avg={cpp_double(self.avg)} std={self.std}"
            )
        if percentiles:
            text += (
                f" p5={self.percentile(5)} median={self.percentile(50)} p95={self.percentile(95)}"
            )
        return text
