"""A test suite over ``tileops_shapes`` in the shape of an operator library's own (run by path, never collected).

Its tests ask for overlapping kernels (each ``scale`` and ``shift`` size from two tests), so the
workers of ``pytest -n N`` meet the same kernels: 3 + 3 + 2 = 8 distinct kernels, and one more
that names a header found nowhere (a capture cannot record it). ``--device`` captures compile
nothing: each call returns the capture's stand-in.
"""

import pytest
import tileops_shapes as ops

SIZES = [256, 512, 1024]


@pytest.mark.parametrize("n", SIZES)
def test_scale(n):
    assert ops.scale(n)() is not None


@pytest.mark.parametrize("n", SIZES)
def test_scale_and_shift(n):
    assert ops.scale(n)() is not None
    assert ops.shift(n)() is not None


@pytest.mark.parametrize("n", [256, 512])
def test_header(n):
    assert ops.header_scale(n)() is not None


def test_lost_header():
    assert ops.lost_header(256)() is not None
