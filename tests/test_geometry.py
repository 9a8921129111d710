"""Padding geometry (docs/DESIGN.md section 2): hand-known values, the seed and TF worked examples,
brute-force properties, and a check that the test reference itself agrees with torch where torch
has an equivalent."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import fastpad
from fastpad import _geometry
from reference import (
    conv_out_size,
    effective_kernel,
    expected_conv,
    reference_conv,
    reference_conv_transpose,
    relative_error,
    resolve_crops,
    same_pads,
)

# --------------------------------------------------------------------------------------------
# The worked examples of the seeds and of TF.


def test_seed_6x6_k5_s2_p2_gives_3x3():
    assert conv_out_size(6, 2, 2, 5, 2, 1) == 3
    x, w = torch.randn(1, 1, 6, 6), torch.randn(1, 1, 5, 5)
    y = fastpad.conv2d(x, w, stride=2, padding=2)
    assert y.shape == (1, 1, 3, 3)
    torch.testing.assert_close(y, F.conv2d(x, w, stride=2, padding=2))


@pytest.mark.parametrize("size, pads", [(224, (2, 3)), (225, (3, 3))])
def test_tf_same_224_and_225(size, pads):
    assert fastpad.same_padding(size, 7, 2) == [pads]
    assert fastpad.same_padding(size, 7, 2, lower=True) == [pads[::-1]]
    assert _geometry.conv_pads("same", [size], [7], [2], [1]) == [pads]
    assert _geometry.conv_pads("same_lower", [size], [7], [2], [1]) == [pads[::-1]]


def test_same_padding_sequences_and_broadcast():
    assert fastpad.same_padding((224, 225), 7, 2) == [(2, 3), (3, 3)]
    assert fastpad.same_padding([224, 225], (7, 7), (2, 2), (1, 1)) == [(2, 3), (3, 3)]
    # Per-dim kernel, stride and dilation: k_eff = 2*(3-1)+1 = 5 in the second dim.
    assert fastpad.same_padding((10, 10), (3, 3), (1, 3), (1, 2)) == [(1, 1), (2, 2)]
    pads = fastpad.same_padding(224, 7, 2)
    assert all(isinstance(lo, int) and isinstance(hi, int) for lo, hi in pads)


# --------------------------------------------------------------------------------------------
# conv_pads and transposed_crops on hand-computed values.


@pytest.mark.parametrize(
    "padding, size, kernel, stride, dilation, expected",
    [
        ("same", [10], [3], [2], [3], [(2, 3)]),  # k_eff 7, out 5, total 5
        ("same_lower", [10], [3], [2], [3], [(3, 2)]),
        ("same", [8], [4], [1], [1], [(1, 2)]),  # even kernel: the extra pad goes at the end
        ("same_lower", [8], [4], [1], [1], [(2, 1)]),
        ("same", [5], [1], [4], [1], [(0, 0)]),  # k_eff < stride: nothing to pad
        ("same", [9], [3], [4], [1], [(1, 1)]),  # out 3, total (3-1)*4 + 3 - 9 = 2
        ("causal", [10, 7], [3, 4], [2, 1], [2, 1], [(4, 0), (3, 0)]),
        ("valid", [10, 7], [3, 4], [2, 1], [2, 1], [(0, 0), (0, 0)]),
        (2, [10, 7], [3, 3], [1, 1], [1, 1], [(2, 2), (2, 2)]),
        ((1, 2), [10, 7], [3, 3], [1, 1], [1, 1], [(1, 1), (2, 2)]),
        (((0, 1), (2, 3)), [10, 7], [3, 3], [1, 1], [1, 1], [(0, 1), (2, 3)]),
    ],
)
def test_conv_pads_known(padding, size, kernel, stride, dilation, expected):
    got = _geometry.conv_pads(padding, size, kernel, stride, dilation)
    assert [tuple(p) for p in got] == expected


@pytest.mark.parametrize(
    "padding, size, kernel, stride, dilation, output_padding, crop_lo, out_size",
    [
        ("same", [5], [3], [2], [1], [0], [0], [10]),  # full 11, T = 1
        ("same_lower", [5], [3], [2], [1], [0], [1], [10]),
        ("same", [5], [5], [2], [1], [0], [1], [10]),  # T = 3: lo 1, hi 2
        ("same_lower", [5], [5], [2], [1], [0], [2], [10]),
        ("same", [5], [3], [2], [1], [1], [0], [11]),  # output_padding adds at the end
        ("same", [4], [1], [3], [1], [0], [0], [12]),  # k_eff < stride: full 10, extended to 12
        ("same", [4], [2], [2], [3], [0], [1], [8]),  # k_eff 4, T 2
        ("valid", [5], [3], [2], [1], [0], [0], [11]),
        ("valid", [5], [3], [2], [1], [1], [0], [12]),
        (1, [5, 6], [3, 3], [2, 1], [1, 1], [0, 0], [1, 1], [9, 6]),
        (((0, 2), (1, 0)), [5, 6], [3, 3], [2, 1], [1, 1], [0, 0], [0, 1], [9, 7]),
    ],
)
def test_transposed_crops_known(padding, size, kernel, stride, dilation, output_padding, crop_lo, out_size):
    got = _geometry.transposed_crops(padding, size, kernel, stride, dilation, output_padding)
    assert (list(got[0]), list(got[1])) == (crop_lo, out_size)
    assert resolve_crops(padding, size, kernel, stride, dilation, output_padding) == (crop_lo, out_size)


# --------------------------------------------------------------------------------------------
# Brute-force properties over random geometry.

geometry = st.tuples(st.integers(1, 300), st.integers(1, 9), st.integers(1, 6), st.integers(1, 4))


def brute_force_same_total(i, k_eff, s):
    """The smallest total pad that gives out = ceil(i/s), found by search."""
    target = math.ceil(i / s)
    return next(t for t in range(0, k_eff + s + 1) if (i + t - k_eff) // s + 1 == target)


@settings(max_examples=300, deadline=None)
@given(geometry, st.booleans())
def test_same_padding_property(geom, lower):
    i, k, s, d = geom
    k_eff = d * (k - 1) + 1
    [(lo, hi)] = fastpad.same_padding(i, k, s, d, lower=lower)
    total = brute_force_same_total(i, k_eff, s)
    assert lo + hi == total == max(0, (math.ceil(i / s) - 1) * s + k_eff - i)
    assert (hi if lower else lo) == total // 2
    assert (i + lo + hi - k_eff) // s + 1 == math.ceil(i / s)
    assert [tuple(p) for p in _geometry.conv_pads("same_lower" if lower else "same", [i], [k], [s], [d])] == [(lo, hi)]


@settings(max_examples=300, deadline=None)
@given(geometry)
def test_causal_property(geom):
    i, k, s, d = geom
    [(lo, hi)] = _geometry.conv_pads("causal", [i], [k], [s], [d])
    assert (lo, hi) == (effective_kernel(k, d) - 1, 0)
    assert conv_out_size(i, lo, hi, k, s, d) == math.ceil(i / s)


@settings(max_examples=300, deadline=None)
@given(geometry, st.sampled_from(["same", "same_lower"]), st.integers(0, 3))
def test_transposed_same_property(geom, padding, output_padding):
    i, k, s, d = geom
    output_padding = output_padding % max(s, d)
    [lo], [out] = _geometry.transposed_crops(padding, [i], [k], [s], [d], [output_padding])
    slack = max(effective_kernel(k, d) - s, 0)
    assert out == i * s + output_padding
    assert lo == (slack // 2 if padding == "same" else slack - slack // 2)


# --------------------------------------------------------------------------------------------
# The reference agrees with torch wherever torch has the same operation.


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_reference_conv_matches_torch_symmetric(mode):
    conv = torch.nn.Conv2d(3, 4, (3, 5), stride=2, padding=(1, 2), dilation=(2, 1), padding_mode=mode).double()
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    expected = conv(x)
    got = reference_conv(x, conv.weight, conv.bias, (2, 2), [(1, 1), (2, 2)], (2, 1), 1, mode)
    assert relative_error(got, expected) < 1e-13


@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")
def test_reference_conv_stride1_same_matches_torch():
    x, w = torch.randn(2, 3, 9, 8, dtype=torch.float64), torch.randn(4, 3, 4, 3, dtype=torch.float64)
    assert relative_error(expected_conv(x, w, padding="same"), F.conv2d(x, w, padding="same")) < 1e-13


@pytest.mark.parametrize("stride, padding, output_padding, dilation", [(2, 1, 1, 1), (3, 2, 2, 1), (1, 2, 1, 2)])
def test_reference_conv_transpose_matches_torch(stride, padding, output_padding, dilation):
    x, w = torch.randn(2, 4, 5, 6, dtype=torch.float64), torch.randn(4, 3, 3, 3, dtype=torch.float64)
    b = torch.randn(3, dtype=torch.float64)
    expected = F.conv_transpose2d(x, w, b, stride, padding, output_padding, 1, dilation)
    crop_lo, out_size = resolve_crops(padding, (5, 6), (3, 3), stride, dilation, output_padding)
    got = reference_conv_transpose(x, w, b, (stride,) * 2, crop_lo, out_size, (dilation,) * 2, 1)
    assert relative_error(got, expected) < 1e-13


def test_same_pads_helper_matches_tf_examples():
    assert same_pads(224, 7, 2, 1) == (2, 3) and same_pads(225, 7, 2, 1) == (3, 3)
