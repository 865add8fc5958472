"""Which GEMM tile a product gets (lowering.gemm_plan), on an H100's 132 compute units."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl.lowering import gemm_plan

H100_UNITS = 132


@pytest.mark.parametrize(
    "m,n,k,computed,wide,tile",
    [
        (784, 44, 44, True, True, "gemm16"),  # NASNet's 28x28 cells, 5x5 and 7x7 windows
        (49, 176, 176, True, True, "gemm16"),  # its 7x7 cells
        (784, 44, 44, True, False, "gemm32"),  # a 3x3 window keeps the 32-wide tile
        (784, 44, 44, False, False, "gemm32"),  # a plain GEMM too
        (12544, 64, 32, True, True, "gemm32"),  # 784 tiles of 32 fill the device already
        (50176, 256, 64, True, True, "gemm64"),  # 64-wide tiles fill it: the large tile
    ],
)
def test_tile(m, n, k, computed, wide, tile):
    name, splits, kps = gemm_plan(m, n, k, H100_UNITS, computed, wide)
    assert name == tile
    assert splits * kps >= k and kps % 32 == 0
