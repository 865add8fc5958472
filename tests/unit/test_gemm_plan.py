"""Which GEMM tile a product gets (gemm_lowering.gemm_plan), on an H100's 132 compute units."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl.gemm_lowering import gemm_plan

H100_UNITS = 132


@pytest.mark.parametrize(
    "m,n,k,depthwise,tile,splits",
    [
        (784, 44, 44, True, "gemm16", 1),  # NASNet's 28x28 cells: 50 groups of 32
        (49, 176, 176, True, "gemm16", 3),  # its 7x7 cells: 12 tiles of 32, 3 K slices
        (196, 88, 88, True, "gemm16", 2),  # its 14x14 cells
        (784, 44, 44, False, "gemm32", 1),  # a GEMM reading A keeps the 32-wide tile
        (3136, 24, 144, True, "gemm32", 3),  # MobileNetV2: 98 tiles x 3 slices, enough
        (196, 112, 480, True, "gemm32", 8),  # hand landmark: 28 tiles x 8 slices, enough
        (12544, 64, 32, True, "gemm32", 1),  # MobileNet v1: 784 tiles of 32 fill the device
        (50176, 256, 64, True, "gemm64", 1),  # 64-wide tiles fill it: the large tile
    ],
)
def test_tile(m, n, k, depthwise, tile, splits):
    name, got_splits, kps = gemm_plan(m, n, k, H100_UNITS, depthwise, depthwise)
    assert (name, got_splits) == (tile, splits)
    assert got_splits * kps >= k and kps % 32 == 0


@pytest.mark.parametrize("per_cu, splits", [(4, 4), (2, 3), (1, 2)])
def test_k_splits_aim_for_the_groups_the_grid_holds(per_cu, splits):
    """MobileNet v1's 14x14 1x1 convolutions (112 tiles of 32, K 512): K split until the
    tiles fill `per_cu` groups a compute unit, the persistent kernel's grid where one runs."""
    name, got, kps = gemm_plan(196, 512, 512, H100_UNITS, groups_per_cu=per_cu)
    assert (name, got) == ("gemm32", splits)
    assert got * kps >= 512 > (got - 1) * kps
