"""A program split into units built at once (delegate_runtime/gpu/opencl/program_units.py):
every kernel in exactly one unit, every helper and macro in each."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl.cl_source import read_source
from delegate_runtime.gpu.opencl.program import program_source
from delegate_runtime.gpu.opencl.program_units import kernel_units, split_units, without_kernels


def kernel_names(source: str) -> list[str]:
    return list(read_source(source)[2])


def test_each_kernel_lands_in_exactly_one_unit_beside_all_the_helpers():
    source = program_source()
    units = split_units(source, 4)
    assert len(units) == 4
    found = [name for unit in units for name in kernel_names(unit)]
    assert sorted(found) == sorted(kernel_names(source))
    helpers = without_kernels(source)
    assert all(without_kernels(unit) == helpers for unit in units)
    assert kernel_names(helpers) == []


def test_units_are_balanced_by_kernel_text():
    source = program_source()
    spans = read_source(source)[2]
    sizes = []
    for unit in split_units(source, 3):
        sizes.append(sum(spans[name].end - spans[name].start for name in kernel_names(unit)))
    largest = max(s.end - s.start for s in spans.values())
    assert max(sizes) - min(sizes) <= largest


def test_one_unit_or_one_kernel_is_the_source_itself():
    source = program_source()
    assert split_units(source, 1) == [source]
    one = split_units(source, 100)
    assert len(one) == len(kernel_names(source))  # never more units than kernels


def test_kernel_units_hold_one_kernel_each_beside_all_the_helpers():
    """A unit per named kernel, in the source's order, each with every helper: the same
    text whichever other kernels a model names, so models share the units' cache entries."""
    source = program_source()
    names = kernel_names(source)
    picked = {names[3], names[0], names[-1]}
    units = kernel_units(source, picked)
    assert [kernel_names(unit) for unit in units] == [[names[0]], [names[3]], [names[-1]]]
    helpers = without_kernels(source)
    assert all(without_kernels(unit) == helpers for unit in units)
    assert kernel_units(source, {names[3]}) == [units[1]]
    with pytest.raises(KeyError, match="no_such_kernel"):
        kernel_units(source, {names[0], "no_such_kernel"})
