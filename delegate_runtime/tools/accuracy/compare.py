"""Reference and delegate results side by side, with the accuracy delta."""

from __future__ import annotations

from collections.abc import Mapping

from ..stats import cpp_double


def delta(reference: Mapping[str, float], test: Mapping[str, float]) -> dict[str, float]:
    """test - reference for every metric both have."""
    return {k: test[k] - reference[k] for k in reference if k in test}


def format_side_by_side(
    reference: Mapping[str, float],
    test: Mapping[str, float],
    reference_name: str = "reference",
    test_name: str = "test",
) -> str:
    """A table: metric, reference, test, delta (test - reference)."""
    lines = [
        f"Accuracy delta ({test_name} - {reference_name}):",
        f"{'Metric':<12}{'Reference':>14}{'Test':>14}{'Delta':>14}",
    ]
    for key, d in delta(reference, test).items():
        lines.append(
            f"{key:<12}{cpp_double(reference[key]):>14}{cpp_double(test[key]):>14}"
            f"{cpp_double(d):>14}"
        )
    return "\n".join(lines) + "\n"
