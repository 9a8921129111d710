"""Fuzzing fastpad against the reference (tests/fuzz.py draws the configurations).

- CI runs a slice: 250 configurations per device from a fixed seed, and 250 from a random seed that the terminal
  summary prints (set FASTPAD_FUZZ_SEED to replay one).
- `pytest -m fuzz` (or FASTPAD_FUZZ=1) runs the long fuzz: FASTPAD_FUZZ_CASES configurations per device
  (default 10,000), from FASTPAD_FUZZ_SEED or a random seed.
- A failure is shrunk to a minimal case, printed as a `FuzzCase(...)` literal: add it to REGRESSIONS below.
"""

import dataclasses
import os
import random

import pytest

import fastpad._geometry
from fuzz import REPORTS, FuzzCase, fuzz, is_well_formed, run_case, shrink, simpler_cases
from reference import DEVICES

FIXED_SEED = 20261122
SLICE_CASES = 250

# Cases the fuzz once failed on, shrunk. Each stays a regular test.
# Float32 input gradient of 4-term sums that cancel (one output position): 2.0e-5 relative by norm, within the rounding
# bound of its sums (fuzz.py's _assert_matches); found by the random seed 283491442.
REGRESSIONS = [
    FuzzCase(transposed=False, size=(16,), in_channels=2, out_channels=4, kernel=(5,), stride=(1,),
             padding=((0, 1),), dilation=(4,), groups=1, padding_mode="zeros", output_padding=0, batch=1, bias=False,
             dtype="float32", layout="contiguous", weight_layout="expanded", backward=True, grad_layout="contiguous",
             seed=340828750),
]


def random_seed():
    return int(os.environ.get("FASTPAD_FUZZ_SEED") or random.SystemRandom().randrange(2**31))


def fuzz_and_report(device, seed, cases):
    """Runs the fuzz, keeps its report for the terminal summary, and fails with every shrunk failure."""
    report = fuzz(device, seed, cases)
    REPORTS.append(report)
    assert not report.failures, "\n" + report.summary()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed_kind", ["fixed", "random"])
def test_fuzz_slice(device, seed_kind):
    seed = FIXED_SEED if seed_kind == "fixed" else random_seed()
    fuzz_and_report(device, seed, SLICE_CASES)


@pytest.mark.fuzz
@pytest.mark.parametrize("device", DEVICES)
def test_fuzz_long(device):
    fuzz_and_report(device, random_seed(), int(os.environ.get("FASTPAD_FUZZ_CASES", "10000")))


@pytest.mark.parametrize("case", REGRESSIONS, ids=repr)
@pytest.mark.parametrize("device", DEVICES)
def test_regression(device, case):
    run_case(case, device)


# --------------------------------------------------------------------------------------------
# The fuzz itself can fail, and shrinks what it finds.


def test_fuzz_finds_and_shrinks_an_injected_bug(monkeypatch):
    """With 'same' putting the odd pixel on the wrong side, the fuzz fails and shrinks the failure to a 1-d,
    single-channel, single-image case that every further simplification makes pass."""
    same_pair = fastpad._geometry._same_pair

    def swapped(size, kernel, stride, dilation, lower):
        return tuple(reversed(same_pair(size, kernel, stride, dilation, lower)))

    monkeypatch.setattr(fastpad._geometry, "_same_pair", swapped)
    # The calls' resolved arguments, which fastpad/functional.py remembers, come from the swapped pads for this test
    # only: it starts from an empty memo, and the memo of the other tests returns afterwards.
    monkeypatch.setattr(fastpad.functional, "_RESOLVED", {})
    report = fuzz("cpu", FIXED_SEED, 200, max_failures=1)
    assert len(report.failures) == 1, report.summary()
    minimal, message = report.failures[0]
    assert "relative error" in message
    assert minimal.padding in ("same", "same_lower") and minimal.dims == 1, minimal
    assert (minimal.in_channels, minimal.out_channels, minimal.batch) == (1, 1, 1), minimal
    for simpler in filter(is_well_formed, simpler_cases(minimal)):
        run_case(simpler)


def test_shrink_reaches_a_local_minimum():
    """A failure defined as 'stride >= 2 in some dim and a size of at least 5 there' shrinks to exactly that."""
    start = FuzzCase(transposed=False, in_channels=12, out_channels=6, groups=3, kernel=(4, 3, 2), stride=(3, 1, 4),
                 dilation=(2, 2, 1), size=(9, 13, 7), padding=((1, 2), (0, 3), (2, 2)), padding_mode="reflect",
                 batch=3, dtype="bfloat16", layout="channels_last", backward=True, seed=5)

    def fails(case):
        return any(s >= 2 and i >= 5 for s, i in zip(case.stride, case.size))

    minimal = shrink(start, fails)
    assert minimal == dataclasses.replace(
        start, in_channels=1, out_channels=1, groups=1, kernel=(1,), stride=(2,), dilation=(1,), size=(5,), padding="valid",
        padding_mode="zeros", batch=1, dtype="float64", layout="contiguous", backward=False, bias=False)
