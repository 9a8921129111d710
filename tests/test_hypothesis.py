"""Random configurations of conv and conv_transpose (dims, padding kind and mode, stride, dilation,
groups, sizes including 1 and primes, batch 0-2, memory layout) against the float64 reference."""

import pytest
import torch
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from reference import (
    DEVICES,
    PADDING_MODES,
    assert_memory_format_kept,
    check_conv,
    check_conv_transpose,
    conv_inputs,
    conv_out_size,
    pads_supported,
    resolve_crops,
    resolve_pads,
)

SIZES = {1: [1, 2, 3, 5, 8, 11, 13, 17], 2: [1, 2, 3, 5, 7, 8, 11], 3: [1, 2, 3, 5, 7]}
CHANNELS = {  # groups kind -> strategy of (c_in, c_out, groups)
    "dense": st.tuples(st.integers(1, 4), st.integers(1, 4)).map(lambda c: (c[0], c[1], 1)),
    "groups2": st.tuples(st.sampled_from([2, 4]), st.sampled_from([2, 4, 6])).map(lambda c: (c[0], c[1], 2)),
    "depthwise": st.integers(1, 5).map(lambda c: (c, c, c)),
    "depthwise_x2": st.integers(1, 4).map(lambda c: (c, 2 * c, c)),
}


def per_dim(nd, strategy):
    return st.tuples(*[strategy] * nd)


@st.composite
def padding_arg(draw, nd, transposed):
    kinds = ["same", "same_lower", "valid", "int", "tuple", "pairs"] + ([] if transposed else ["causal"])
    kind = draw(st.sampled_from(kinds))
    if kind == "int":
        return draw(st.integers(0, 3))
    if kind == "tuple":
        return draw(per_dim(nd, st.integers(0, 3)))
    if kind == "pairs":
        return draw(per_dim(nd, st.tuples(st.integers(0, 4), st.integers(0, 4))))
    return kind


@st.composite
def configs(draw):
    nd = draw(st.integers(1, 3))
    transposed = draw(st.booleans())
    stride = draw(per_dim(nd, st.integers(1, 4)))
    dilation = draw(per_dim(nd, st.integers(1, 3)))
    c_in, c_out, groups = draw(st.sampled_from(sorted(CHANNELS)).flatmap(CHANNELS.get))
    cfg = dict(
        nd=nd, transposed=transposed, stride=stride, dilation=dilation, c_in=c_in, c_out=c_out, groups=groups,
        kernel=draw(per_dim(nd, st.integers(1, 4))),
        size=draw(per_dim(nd, st.sampled_from(SIZES[nd]))),
        batch=draw(st.integers(0, 2)),
        bias=draw(st.booleans()),
        padding=draw(padding_arg(nd, transposed)),
        layout=draw(st.sampled_from(["contiguous", "non_contiguous"] + (["channels_last"] if nd > 1 else []))),
        seed=draw(st.integers(0, 2**31 - 1)),
    )
    if transposed:
        cfg["output_padding"] = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    else:
        cfg["padding_mode"] = draw(st.sampled_from(PADDING_MODES))
    return cfg


def apply_layout(x, layout):
    if layout == "channels_last":
        return x.to(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    if layout == "non_contiguous":
        wide = torch.randn(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
        wide[..., ::2] = x
        return wide[..., ::2]
    return x


def is_valid(cfg):
    """Skips what the reference itself rejects: an empty output, or pads F.pad refuses in this mode."""
    if cfg["transposed"]:
        _, out_size = resolve_crops(cfg["padding"], cfg["size"], cfg["kernel"], cfg["stride"], cfg["dilation"],
                                    cfg["output_padding"])
        return min(out_size) >= 1
    pads = resolve_pads(cfg["padding"], cfg["size"], cfg["kernel"], cfg["stride"], cfg["dilation"])
    sizes = [conv_out_size(i, lo, hi, k, s, d)
             for (lo, hi), i, k, s, d in zip(pads, cfg["size"], cfg["kernel"], cfg["stride"], cfg["dilation"])]
    return min(sizes) >= 1 and pads_supported(pads, cfg["size"], cfg["padding_mode"])


def run_config(device, cfg):
    assume(is_valid(cfg))
    note(repr(cfg))
    torch.manual_seed(cfg["seed"])
    x, w, b = conv_inputs(cfg["size"], cfg["c_in"], cfg["c_out"], cfg["kernel"], cfg["groups"], cfg["batch"],
                          cfg["bias"], transposed=cfg["transposed"], device=device)
    x = apply_layout(x, cfg["layout"])
    kwargs = dict(stride=cfg["stride"], padding=cfg["padding"], dilation=cfg["dilation"], groups=cfg["groups"])
    if cfg["transposed"]:
        y = check_conv_transpose(x, w, b, output_padding=cfg["output_padding"], **kwargs)
    else:
        y = check_conv(x, w, b, padding_mode=cfg["padding_mode"], **kwargs)
    assert_memory_format_kept(x, y)


HEALTH = dict(deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


@settings(max_examples=150, **HEALTH)
@given(configs())
@pytest.mark.parametrize("device", DEVICES)
def test_random_configurations(device, cfg):
    run_config(device, cfg)


@pytest.mark.slow
@settings(max_examples=3000, **HEALTH)
@given(configs())
@pytest.mark.parametrize("device", DEVICES)
def test_random_configurations_slow(device, cfg):
    run_config(device, cfg)
