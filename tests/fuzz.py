"""Random configurations of conv and conv_transpose against the reference (F.pad + F.conv*, and the full
F.conv_transpose* cropped), forward and backward, with a shrinker that reduces a failing configuration to a
small reproducer.

A `FuzzCase` is everything one check needs, its inputs included (they are drawn from `FuzzCase.seed`), so a failing
case printed by the fuzz (`repr(case)`) can be pasted into tests/test_fuzz.py's REGRESSIONS and becomes a regular test.
"""

import dataclasses
import functools
import math
import random
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from fastpad.cases import LAYOUTS, ConvCase, Padding, arrange
from reference import (
    PADDING_MODES,
    PADDING_STRINGS,
    assert_matches,
    conv_out_size,
    expected_conv,
    expected_conv_transpose,
    pads_supported,
    poison,
    resolve_crops,
    resolve_pads,
    tolerance,
)

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Sizes include 1 and primes; 3-d stays smaller so that a case costs about the same in every rank.
SIZES = {1: (1, 2, 3, 5, 7, 8, 11, 13, 16, 17, 31, 64, 97), 2: (1, 2, 3, 5, 7, 8, 11, 13, 16, 17, 23), 3: (1, 2, 3, 5, 7, 8)}
# Sizes that cross the CPU kernels' band and tile boundaries (phase planes of 256 KiB, column buffers of 512 KiB).
LARGE_SIZES = {1: (1021, 4099, 70001), 2: (61, 127, 257), 3: (17, 29)}


@dataclass(frozen=True)
class FuzzCase(ConvCase):
    """A case (fastpad/cases.py; kernel, stride, dilation and output_padding one entry per dimension), and what the
    fuzz varies beyond it: the weight's layout, whether to check the backward, the gradient's layout, and the seed
    of the inputs."""
    weight_layout: str = "contiguous"
    backward: bool = False
    grad_layout: str = "contiguous"  # of the gradient fed to backward
    seed: int = 0


# --------------------------------------------------------------------------------------------
# Drawing cases


def _per_dim(rng, nd, draw):
    return tuple(draw() for _ in range(nd))


def _channels(rng):
    """(c_in, c_out, groups): dense, grouped (4 and 8 groups: 8 output channels or more, where channels-last convs
    with few channels per group take cpu_grouped_expanded), depthwise, depthwise with a multiplier, and now and then
    >= 16 channels per group, where the CPU kernels switch to tap GEMMs."""
    kind = rng.choice(("dense", "dense", "grouped", "depthwise", "depthwise_multiplier", "wide"))
    if kind == "dense":
        return rng.randint(1, 6), rng.randint(1, 6), 1
    if kind == "grouped":
        groups = rng.choice((2, 3, 4, 8))
        return groups * rng.randint(1, 3), groups * rng.randint(1, 3), groups
    if kind == "depthwise":
        channels = rng.randint(1, 9)
        return channels, channels, channels
    if kind == "depthwise_multiplier":
        channels = rng.randint(1, 5)
        return channels, channels * rng.choice((2, 3)), channels
    groups = rng.choice((1, 1, 2))
    return groups * rng.randint(16, 24), groups * rng.randint(16, 24), groups


def _padding(rng, nd, transposed):
    kind = rng.choice(("string", "string", "int", "tuple", "pairs"))
    if kind == "string":
        strings = [s for s in PADDING_STRINGS if not (transposed and s == "causal")]
        return rng.choice(strings)
    if kind == "int":
        return rng.randint(0, 4)
    if kind == "tuple":
        return _per_dim(rng, nd, lambda: rng.randint(0, 4))
    return _per_dim(rng, nd, lambda: (rng.randint(0, 5), rng.randint(0, 5)))


def draw_case(rng: random.Random) -> FuzzCase:
    nd = rng.choice((1, 1, 2, 2, 2, 3))
    transposed = rng.random() < 0.35
    in_channels, out_channels, groups = _channels(rng)
    large = rng.random() < 0.03
    sizes = LARGE_SIZES[nd] if large else SIZES[nd]
    stride = _per_dim(rng, nd, lambda: rng.randint(1, 4))
    dilation = _per_dim(rng, nd, lambda: rng.choice((1, 1, 2, 3, 4)))
    layouts = LAYOUTS if nd > 1 else tuple(layout for layout in LAYOUTS if layout != "channels_last")
    fields = dict(
        transposed=transposed, in_channels=in_channels, out_channels=out_channels, groups=groups,
        kernel=_per_dim(rng, nd, lambda: rng.randint(1, 3 if nd == 3 else 5)),
        stride=stride, dilation=dilation,
        size=_per_dim(rng, nd, lambda: rng.choice(sizes)),
        padding=_padding(rng, nd, transposed),
        batch=1 if large else rng.choice((0, 1, 1, 2, 2, 3)),
        bias=rng.random() < 0.7,
        dtype=rng.choice(tuple(DTYPES)),
        layout=rng.choice(layouts),
        weight_layout=rng.choice(("contiguous", "contiguous") + layouts[1:]),
        backward=rng.random() < 0.5,
        grad_layout=rng.choice(layouts),
        seed=rng.randrange(2**31),
    )
    if transposed:
        fields["output_padding"] = tuple(rng.randint(0, max(s, d) - 1) for s, d in zip(stride, dilation))
    else:
        fields["padding_mode"] = rng.choice(PADDING_MODES)
    return FuzzCase(**fields)


# --------------------------------------------------------------------------------------------
# Running one case


def reference_accepts(case: FuzzCase) -> bool:
    """Whether the reference defines this case: a non-empty output, and pads F.pad takes in this mode."""
    if case.transposed:
        _, out_size = resolve_crops(case.padding, case.size, case.kernel, case.stride, case.dilation,
                                    case.per_dim(case.output_padding))
        return min(out_size) >= 1
    pads = resolve_pads(case.padding, case.size, case.kernel, case.stride, case.dilation)
    sizes = [conv_out_size(i, lo, hi, k, s, d)
             for (lo, hi), i, k, s, d in zip(pads, case.size, case.kernel, case.stride, case.dilation)]
    return min(sizes) >= 1 and pads_supported(pads, case.size, case.padding_mode)


def run_case(case: FuzzCase, device="cpu") -> dict:
    """Checks fastpad against the reference on this case. Returns {'check': relative error} per checked tensor,
    or {} when the reference rejects the case (fastpad must then raise ValueError). Raises AssertionError on a
    mismatch, and lets any other exception from fastpad through."""
    import fastpad

    dtype = DTYPES[case.dtype]
    generator = torch.Generator().manual_seed(case.seed)
    x, w, b = case.random_inputs(generator, device)
    w = arrange(w, case.weight_layout)
    fn = getattr(fastpad, case.op_name)
    if not reference_accepts(case):
        try:
            fn(x, w, b, **case.kwargs())
        except ValueError:
            return {}
        raise AssertionError("fastpad returned a tensor where the reference rejects the configuration")

    expected_fn = expected_conv_transpose if case.transposed else expected_conv
    leaves = [t.detach().requires_grad_(case.backward) if t is not None else None for t in (x, w, b)]
    reference_leaves = [t.detach().double().requires_grad_(case.backward) if t is not None else None
                        for t in (x, w, b)]
    expected = expected_fn(*reference_leaves, **case.kwargs())
    poison(expected.shape, dtype, device)
    actual = fn(*leaves, **case.kwargs())
    terms = _longest_sum(case, tuple(expected.shape[2:]))
    grad = None
    present = [i for i, t in enumerate(leaves) if t is not None]

    @functools.lru_cache(maxsize=None)
    def magnitudes():
        """The same reference over the inputs' absolute values (and the gradient's): every output and gradient element
        is then the sum of its terms' absolute values (the ops are bilinear, the padding modes' folds sums), which
        bounds its rounding. Computed only for a check that misses its relative tolerance: [output, *gradients]."""
        magnitude_leaves = [t.detach().double().abs().requires_grad_(grad is not None) if t is not None else None
                            for t in (x, w, b)]
        magnitude = expected_fn(*magnitude_leaves, **case.kwargs())
        if grad is None:
            return [magnitude]
        return [magnitude, *torch.autograd.grad(magnitude, [magnitude_leaves[i] for i in present], grad.double().abs())]

    errors = {"output": _assert_matches(actual, expected, lambda: magnitudes()[0], terms, dtype, "output")}
    if not case.backward:
        return errors

    grad = arrange(torch.randn(expected.shape, generator=generator, dtype=torch.float64).to(dtype=dtype, device=device),
                   case.grad_layout)
    magnitudes.cache_clear()  # the output's magnitude, if asked for, was computed without the gradient
    expected_grads = torch.autograd.grad(expected, [reference_leaves[i] for i in present], grad.double())
    for i, expected_grad in zip(present, expected_grads):
        poison(expected_grad.shape, dtype, device)
    actual_grads = torch.autograd.grad(actual, [leaves[i] for i in present], grad)
    for k, (i, actual_grad, expected_grad) in enumerate(zip(present, actual_grads, expected_grads)):
        what = ("grad_input", "grad_weight", "grad_bias")[i]
        errors[what] = _assert_matches(actual_grad, expected_grad, lambda k=k: magnitudes()[k + 1], terms, dtype, what)
    return errors


def _longest_sum(case: FuzzCase, out_size: Tuple[int, ...]) -> int:
    """The most terms any output or gradient element of the case sums: a conv output's taps x input channels per group
    (plus the bias), an input gradient's taps x output channels per group, a weight gradient's batch x positions."""
    taps = math.prod(case.per_dim(case.kernel))
    channels = max(case.in_channels, case.out_channels) // case.groups
    positions = case.batch * max(math.prod(out_size), math.prod(case.size))
    return max(taps * channels + 1, positions)


def _assert_matches(actual, expected, magnitude, terms, dtype, what):
    """assert_matches, except that a float32 or float64 result that misses its relative tolerance passes where every
    element is within the rounding bound of its sum: |actual - expected| <= terms x eps x magnitude(), the sum of its
    terms' absolute values. Where the terms cancel (an input gradient of 4-term sums over one output position, 2.0e-5
    by norm against 1e-5), that bound is what a correct float32 sum can promise; a wrong or missing term exceeds it."""
    try:
        return assert_matches(actual, expected, dtype, what)
    except AssertionError:
        if dtype not in (torch.float32, torch.float64) or actual.shape != expected.shape:
            raise
        difference = actual.double() - expected
        if not bool((difference.abs() <= terms * torch.finfo(dtype).eps * magnitude().to(actual.device)).all()):
            raise
        return (difference.norm() / expected.norm().clamp_min(1e-300)).item()



# --------------------------------------------------------------------------------------------
# Shrinking a failing case


def _drop_dim(case: FuzzCase, dim: int) -> FuzzCase:
    def drop(values):
        return values[:dim] + values[dim + 1:]

    padding = case.padding if isinstance(case.padding, (str, int)) else drop(case.padding)
    per_dim = ("kernel", "stride", "dilation", "size") + (("output_padding",) if case.transposed else ())
    return dataclasses.replace(case, padding=padding, **{name: drop(case.per_dim(getattr(case, name)))
                                                         for name in per_dim})


def _with_dim(case: FuzzCase, name: str, dim: int, value) -> FuzzCase:
    values = list(case.per_dim(getattr(case, name)))
    values[dim] = value
    return dataclasses.replace(case, **{name: tuple(values)})


def _smaller_ints(value: int, lowest: int):
    """Candidates below `value`, smallest first: lowest, value // 2, value - 1."""
    return sorted({v for v in (lowest, value // 2, value - 1) if lowest <= v < value})


def _smaller_paddings(padding: Padding):
    if padding == "valid":
        return []
    if isinstance(padding, str):
        return ["valid"]
    if isinstance(padding, int):
        return ["valid"] + _smaller_ints(padding, 0)
    flat = list(padding)
    candidates = ["valid"]
    for i, p in enumerate(flat):
        if isinstance(p, int):
            candidates += [tuple(flat[:i] + [v] + flat[i + 1:]) for v in _smaller_ints(p, 0)]
        else:
            for side in (0, 1):
                for v in _smaller_ints(p[side], 0):
                    pair = (v, p[1]) if side == 0 else (p[0], v)
                    candidates.append(tuple(flat[:i] + [pair] + flat[i + 1:]))
    return candidates


def _smaller_channels(case: FuzzCase):
    """(in_channels, out_channels, groups) with fewer channels, keeping groups a divisor of both."""
    g, c_in, c_out = case.groups, case.in_channels, case.out_channels
    candidates = [(1, 1, 1), (c_in // g, c_out // g, 1), (g, g, g)]
    candidates += [(g * v, c_out, g) for v in _smaller_ints(c_in // g, 1)]
    candidates += [(c_in, g * v, g) for v in _smaller_ints(c_out // g, 1)]
    return [c for c in dict.fromkeys(candidates) if c != (c_in, c_out, g) and sum(c[:2]) <= c_in + c_out]


def simpler_cases(case: FuzzCase):
    """Every one-step simplification of `case`, the biggest steps first."""
    for dim in range(case.dims if case.dims > 1 else 0):
        yield _drop_dim(case, dim)
    if case.batch > 1:
        yield dataclasses.replace(case, batch=1)
    for in_channels, out_channels, groups in _smaller_channels(case):
        yield dataclasses.replace(case, in_channels=in_channels, out_channels=out_channels, groups=groups)
    for name in ("size", "kernel", "stride", "dilation"):
        for dim in range(case.dims):
            for value in _smaller_ints(case.per_dim(getattr(case, name))[dim], 1):
                yield _with_dim(case, name, dim, value)
    for padding in _smaller_paddings(case.padding):
        yield dataclasses.replace(case, padding=padding)
    for dim in range(case.dims if case.transposed else 0):
        for value in _smaller_ints(case.per_dim(case.output_padding)[dim], 0):
            yield _with_dim(case, "output_padding", dim, value)
    if case.padding_mode != "zeros":
        yield dataclasses.replace(case, padding_mode="zeros")
    for name, plain in (("backward", False), ("bias", False), ("layout", "contiguous"),
                        ("weight_layout", "contiguous"), ("grad_layout", "contiguous"), ("dtype", "float64")):
        if getattr(case, name) != plain:
            yield dataclasses.replace(case, **{name: plain})


def is_well_formed(case: FuzzCase) -> bool:
    """What draw_case guarantees: output_padding below max(stride, dilation) in every dim."""
    return all(p < max(s, d) for p, s, d in zip(case.per_dim(case.output_padding), case.per_dim(case.stride),
                                                 case.per_dim(case.dilation)))


def shrink(case: FuzzCase, fails, max_tries=2000) -> FuzzCase:
    """Greedily takes the first simplification that still fails until none does: a case where every single
    simplification passes."""
    tries = 0
    progress = True
    while progress and tries < max_tries:
        progress = False
        for candidate in simpler_cases(case):
            if not is_well_formed(candidate):
                continue
            tries += 1
            if fails(candidate):
                case, progress = candidate, True
                break
    return case


def outcome(case: FuzzCase, device) -> Tuple[Optional[dict], Optional[Exception]]:
    """(run_case's errors, None) when the case passes, (None, the exception) when it fails."""
    try:
        return run_case(case, device), None
    except Exception as error:  # noqa: BLE001 (any exception from fastpad is a finding)
        return None, error


def failure_of(case: FuzzCase, device) -> Optional[Exception]:
    return outcome(case, device)[1]


# --------------------------------------------------------------------------------------------
# A fuzz run and its report


@dataclass
class FuzzReport:
    device: str
    seed: int
    cases: int = 0
    rejected: int = 0  # cases the reference rejects, where fastpad raised ValueError as it must
    checks: dict = dataclasses.field(default_factory=dict)  # (dtype, "forward"/"backward") -> tensors compared
    worst: dict = dataclasses.field(default_factory=dict)  # dtype -> (relative error, check, case)
    failures: list = dataclasses.field(default_factory=list)  # (minimal case, error message)

    def add(self, case: FuzzCase, errors: dict):
        self.cases += 1
        if not errors:
            self.rejected += 1
        for what, error in errors.items():
            direction = "forward" if what == "output" else "backward"
            self.checks[case.dtype, direction] = self.checks.get((case.dtype, direction), 0) + 1
            if error > self.worst.get(case.dtype, (-1.0,))[0]:
                self.worst[case.dtype] = (error, what, case)

    def summary(self) -> str:
        lines = [f"fuzz on {self.device}, seed {self.seed}: {self.cases - self.rejected} configurations compared "
                 f"with the reference, {len(self.failures)} failed; {self.rejected} more that the reference rejects, "
                 "where fastpad raised ValueError as it must"]
        for dtype in DTYPES:
            if dtype in self.worst:
                error, what, _ = self.worst[dtype]
                forward, backward = self.checks.get((dtype, "forward"), 0), self.checks.get((dtype, "backward"), 0)
                lines.append(f"  {dtype:>8}: {forward} forward and {backward} gradient comparisons, worst relative "
                             f"error {error:.2e} ({what}; tolerance {tolerance(DTYPES[dtype]):.0e})")
        for case, message in self.failures:
            lines.append(f"  FAILED {message}\n    minimal reproducer: {case!r}")
        return "\n".join(lines)


REPORTS = []  # the FuzzReports of this session's fuzz tests, printed in the terminal summary (tests/conftest.py)


def fuzz(device, seed: int, cases: int, max_failures=3) -> FuzzReport:
    """Compares `cases` random configurations drawn from `seed` with the reference (the configurations the
    reference rejects come on top); shrinks each failure, and stops at max_failures."""
    rng = random.Random(seed)
    report = FuzzReport(device=device, seed=seed)
    while report.cases - report.rejected < cases:
        case = draw_case(rng)
        errors, error = outcome(case, device)
        if error is None:
            report.add(case, errors)
            continue
        kind = type(error)
        minimal = shrink(case, lambda c: isinstance(failure_of(c, device), kind))
        report.cases += 1
        report.failures.append((minimal, f"{kind.__name__}: {failure_of(minimal, device)}"))
        if len(report.failures) >= max_failures:
            break
    return report
