"""argparse types of the farm commands (devicefarm.commands.argtypes): a bad value is a
usage error, its message naming what is wrong."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from devicefarm.commands import argtypes


@pytest.mark.parametrize(
    ("parse", "text", "want"),
    [
        (argtypes.configs, "cpu,gpu-fp16", ["cpu", "gpu-fp16"]),
        (argtypes.configs, " gpu-fp32 ,", ["gpu-fp32"]),
        (argtypes.selector, "kind=opencl,driver>=535", "kind=opencl,driver>=535"),
        (argtypes.selector, "opencl:*", "opencl:*"),
        (argtypes.output_file_or_stdout, "-", "-"),
    ],
)
def test_good_values(parse, text: str, want) -> None:
    assert parse(text) == want


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (argtypes.configs, "gpu16", "unknown configuration 'gpu16'"),
        (argtypes.configs, "cpu,cpu", "configuration 'cpu' is given twice"),
        (argtypes.configs, ",", "no configuration given"),
        (argtypes.selector, "driver>>1", "bad selector term 'driver>>1'"),
        (argtypes.selector, "colour=red", "unknown selector field 'colour'"),
        (argtypes.output_file_or_stdout, "{tmp}/no/x.json", "folder {tmp}/no does not exist"),
        (argtypes.output_file_or_stdout, "{tmp}", "is a directory; give a file path"),
    ],
)
def test_bad_values(tmp_path: Path, parse, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        parse(text.format(tmp=tmp_path))
    assert message.format(tmp=tmp_path) in str(refused.value)
