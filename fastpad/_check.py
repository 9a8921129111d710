"""`python -m fastpad check`: a deterministic validation sweep of fastpad against the reference.

Every case draws its own seeded inputs, with values that bfloat16 represents exactly, so one float64 reference
(fastpad/reference.py: F.pad + F.conv*, full F.conv_transpose* + crop) serves every dtype, memory layout and device.
A case (fastpad/cases.py) fails when the output or any gradient (input, weight, bias) is further than the dtype's
tolerance from the reference (relative error by norm, docs/DESIGN.md section 7), when a channels_last input does not
give a channels_last output, when a padding string gives an output size other than docs/DESIGN.md section 2 fixes, or
when fastpad raises.
"""
import itertools
import math
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from fastpad._report import text_table
from fastpad.cases import CHANNELS_LAST_FORMAT, ConvCase, arrange, dtype_name
from fastpad.reference import output_and_grads, relative_error, tolerance

PADDING_STRINGS = ("same", "same_lower", "valid", "causal")
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
STRIDES = (1, 2, 3)
DILATIONS = (1, 2)
OUTPUT_PADDINGS = (0, 1)
BATCH = 2
# grouping -> (in_channels, out_channels, groups)
CHANNELS = {"groups=1": (4, 6, 1), "groups=2": (4, 6, 2), "depthwise": (4, 4, 4)}
# Odd, unequal sizes per dimension; large enough that reflect padding (pad < size) holds for every case here.
INPUT_SIZE = {1: (11,), 2: (9, 10), 3: (7, 8, 7)}
KERNELS = {
    1: [(3,), (4,), (2,), (1,)],
    2: [(3, 3), (4, 2), (1, 3), (2, 2)],
    3: [(3, 3, 3), (2, 3, 4), (3, 1, 2)],
}
# Explicit (lo, hi) pairs and torch-style symmetric ints, per number of spatial dimensions.
EXPLICIT_PAIRS = {1: ((2, 1),), 2: ((0, 2), (3, 1)), 3: ((1, 0), (0, 2), (2, 1))}
SYMMETRIC = {1: 1, 2: (1, 2), 3: (2, 0, 1)}

DTYPES = (torch.float64, torch.float32, torch.bfloat16)
MAX_FAILURES_SHOWN = 5


def grid_case(transposed: bool, dims: int, padding, padding_mode: str, stride: int, dilation: int, grouping: str,
              kernel: Tuple[int, ...], output_padding: int = 0) -> ConvCase:
    """A case of the grid: the input size, channels and batch of its dims and grouping; float64, contiguous (each
    run replaces the dtype and layout)."""
    in_channels, out_channels, groups = CHANNELS[grouping]
    return ConvCase(transposed, INPUT_SIZE[dims], in_channels, out_channels, kernel, stride, padding, dilation, groups,
                    padding_mode, output_padding, batch=BATCH, dtype="float64")


def groupings(rotation: int, every_grouping: bool) -> List[str]:
    """All groupings, or one that rotates with the other axes so each appears with every mode, stride and dilation."""
    names = list(CHANNELS)
    return names if every_grouping else [names[rotation % len(names)]]


def conv_cases(pick_kernel: Callable[[int], Tuple[int, ...]], every_grouping: bool) -> List[ConvCase]:
    cases = []
    for dims in (1, 2, 3):
        paddings = PADDING_STRINGS + (EXPLICIT_PAIRS[dims], SYMMETRIC[dims])
        for padding, (mode_index, mode), stride, dilation in itertools.product(
                paddings, enumerate(PADDING_MODES), STRIDES, DILATIONS):
            for grouping in groupings(mode_index + stride + dilation, every_grouping):
                cases.append(grid_case(False, dims, padding, mode, stride, dilation, grouping, pick_kernel(dims)))
    return cases


def transposed_cases(pick_kernel: Callable[[int], Tuple[int, ...]], every_grouping: bool) -> List[ConvCase]:
    cases = []
    for dims in (1, 2, 3):
        paddings = ("same", "same_lower", "valid", EXPLICIT_PAIRS[dims], SYMMETRIC[dims])
        for padding, stride, dilation, output_padding in itertools.product(
                paddings, STRIDES, DILATIONS, OUTPUT_PADDINGS):
            if output_padding >= max(stride, dilation):
                continue
            for grouping in groupings(stride + dilation + output_padding, every_grouping):
                cases.append(grid_case(True, dims, padding, "zeros", stride, dilation, grouping, pick_kernel(dims),
                                       output_padding))
    return cases


def all_cases(quick: bool = False) -> List[ConvCase]:
    """The grid of cases. Kernels come from a fixed-seed generator, so they vary independently of the grid axes.

    Every (padding, mode, stride, dilation[, output_padding]) meets all three groupings; with `quick`, only one,
    rotating, so that each grouping still meets every mode, stride and dilation (a third of the cases).
    """
    kernel_draws = random.Random(0)

    def pick_kernel(dims):
        return kernel_draws.choice(KERNELS[dims])

    return conv_cases(pick_kernel, not quick) + transposed_cases(pick_kernel, not quick)


def expected_out_size(case: ConvCase) -> Optional[List[int]]:
    """The output size docs/DESIGN.md section 2 fixes for a padding string (None for explicit numbers).

    Computed here, independently of fastpad._geometry, so a wrong geometry cannot hide behind a matching reference.
    """
    if case.padding not in PADDING_STRINGS:
        return None
    sizes = []
    for size, kernel in zip(case.size, case.per_dim(case.kernel)):
        kernel_extent = case.dilation * (kernel - 1) + 1
        if case.transposed:
            full = (size - 1) * case.stride + kernel_extent
            sizes.append((full if case.padding == "valid" else size * case.stride) + case.output_padding)
        elif case.padding == "valid":
            sizes.append((size - kernel_extent) // case.stride + 1)
        else:
            sizes.append(-(-size // case.stride))
    return sizes


def bfloat16_exact_randn(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """Standard normal float64 values rounded to bfloat16, so every dtype under test sees the same numbers."""
    return torch.randn(tuple(shape), generator=generator, dtype=torch.float64).bfloat16().double()


def case_inputs(case: ConvCase, seed: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator]:
    """The case's float64 (x, weight, bias), rounded to values bfloat16 holds, and the generator that drew them."""
    generator = torch.Generator().manual_seed(seed)
    x, w, b = (t.bfloat16().double() for t in case.random_inputs(generator))
    return x, w, b, generator


# The layouts each case runs in, in report order (fastpad/cases.py arranges them).
LAYOUTS = ("contiguous", "channels_last", "strided")


def layouts_for(case: ConvCase, dtype: torch.dtype) -> List[str]:
    """Contiguous always; channels_last where it exists (2-d, 3-d); strided views once per case, in float64."""
    wanted = ["contiguous"] + (["channels_last"] if case.dims > 1 else [])
    return wanted + (["strided"] if dtype == torch.float64 else [])


@dataclass
class Expected:
    """The float64 reference of one case: its inputs, output and gradients."""
    inputs: Tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    grad_output: torch.Tensor
    output: torch.Tensor
    grads: List[torch.Tensor]


def compute_expected(case: ConvCase, seed: int) -> Expected:
    x, w, b, generator = case_inputs(case, seed)
    drawn = {}

    def draw_grad_output(output):
        drawn["grad_output"] = bfloat16_exact_randn(output.shape, generator)
        return drawn["grad_output"]

    output, grads = output_and_grads(case.reference_function(), (x, w, b), draw_grad_output)
    return Expected((x, w, b), drawn["grad_output"], output, grads)


def run_fastpad(case: ConvCase, expected: Expected, device: str) -> Tuple[float, str]:
    """The worst relative error over output and gradients, and why the case failed ('' when only numbers count).
    Input and weight are arranged in the case's layout."""
    x, w, b = (t.to(device=device, dtype=case.torch_dtype) for t in expected.inputs)
    x, w = arrange(x, case.layout), arrange(w, case.layout)
    grad_output = expected.grad_output.to(device=device, dtype=case.torch_dtype)
    output, grads = output_and_grads(case.fastpad_function(), (x, w, b), lambda _: grad_output)
    errors = [relative_error(actual.cpu(), wanted)
              for actual, wanted in zip([output] + grads, [expected.output] + expected.grads)]
    worst = float("nan") if any(math.isnan(error) for error in errors) else max(errors)
    if case.layout == "channels_last" and not output.is_contiguous(memory_format=CHANNELS_LAST_FORMAT[output.dim()]):
        return worst, "output is not channels_last"
    return worst, ""


@dataclass
class Tally:
    cases: int = 0
    errors: int = 0
    raised: int = 0
    worst: float = 0.0  # over the runs that returned; NaN once any returned NaN
    failures: List[str] = field(default_factory=list)

    def add(self, error: Optional[float], failure: str) -> None:
        self.cases += 1
        if error is None:
            self.raised += 1
        elif math.isnan(error) or math.isnan(self.worst):
            self.worst = float("nan")
        else:
            self.worst = max(self.worst, error)
        if failure:
            self.errors += 1
            self.failures.append(failure)


def first_line(exception: Exception) -> str:
    return (str(exception).splitlines() or [""])[0]


def present_devices() -> List[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def size_problem(case: ConvCase, expected: Expected) -> str:
    wanted, got = expected_out_size(case), list(expected.output.shape[2:])
    if wanted is None or got == wanted:
        return ""
    return f"fastpad._geometry gives output size {got}, docs/DESIGN.md section 2 says {wanted}"


def check_one(case: ConvCase, expected: Expected, device: str) -> Tuple[Optional[float], str]:
    """The worst relative error of one run (None when fastpad raised) and why it failed ('' when it passed)."""
    try:
        error, problem = run_fastpad(case, expected, device)
    except Exception as exception:  # a valid case must never raise: count it and keep sweeping
        return None, f"{type(exception).__name__}: {first_line(exception)}"
    if not problem and not error <= tolerance(case.torch_dtype):  # `not <=` also catches NaN
        problem = f"relative error {error:.3g}"
    return error, problem or size_problem(case, expected)


def sweep(devices: Sequence[str], quick: bool) -> Dict[Tuple[str, str, str, str], Tally]:
    """Run every case on every device, dtype and layout; tallies keyed by (device, dtype, op kind, layout)."""
    tallies: Dict[Tuple[str, str, str, str], Tally] = defaultdict(Tally)
    for seed, case in enumerate(all_cases(quick)):
        expected = compute_expected(case, seed)
        kind = "conv_transpose" if case.transposed else "conv"
        runs = [(device, dtype, layout)
                for device in devices for dtype in DTYPES for layout in layouts_for(case, dtype)]
        for device, dtype, layout in runs:
            run = replace(case, dtype=dtype_name(dtype), layout=layout)
            error, problem = check_one(run, expected, device)
            failure = f"{problem}: {run.describe()}" if problem else ""
            tallies[(device, dtype_name(dtype), kind, layout)].add(error, failure)
    return tallies


def report_order(key: Tuple[str, str, str, str]) -> Tuple[int, str, int]:
    _, dtype, kind, layout = key
    return DTYPES.index(getattr(torch, dtype)), kind, list(LAYOUTS).index(layout)


def print_report(tallies: Dict[Tuple[str, str, str, str], Tally]) -> None:
    for device in sorted({key[0] for key in tallies}):
        keys = sorted((key for key in tallies if key[0] == device), key=report_order)
        print(f"\nfastpad check on {device_name(device)}")
        rows = []
        for key in keys:
            tally = tallies[key]
            dtype = getattr(torch, key[1])
            rows.append([key[1], key[2], key[3], tally.cases, tally.errors, tally.raised, f"{tally.worst:.2e}",
                         f"{tolerance(dtype):.0e}"])
        headers = ["dtype", "op", "layout", "cases", "errors", "of which raised", "worst rel. error", "tolerance"]
        print(text_table(headers, rows))
        for key in keys:
            for failure in tallies[key].failures[:MAX_FAILURES_SHOWN]:
                print(f"  FAIL {key[0]} {key[1]}: {failure}")
            hidden = len(tallies[key].failures) - MAX_FAILURES_SHOWN
            if hidden > 0:
                print(f"  ... and {hidden} more failures for {' '.join(key)}")


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


def main(devices: Optional[Sequence[str]] = None, quick: bool = False) -> int:
    """Run the sweep, print the tables; the exit status is 1 when any case failed."""
    import fastpad  # noqa: F401  (fail early, with the import error, if the extension is not built)

    started = time.perf_counter()
    tallies = sweep(list(devices or present_devices()), quick)
    print_report(tallies)
    cases = sum(tally.cases for tally in tallies.values())
    failed = sum(tally.errors for tally in tallies.values())
    print(f"\n{cases} cases ({len(all_cases(quick))} configurations x devices x dtypes x layouts; each checks "
          f"the output and the input, weight and bias gradients), {failed} failed, "
          f"{time.perf_counter() - started:.1f} s")
    return 1 if failed else 0
