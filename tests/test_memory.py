"""No padded tensor is ever built, shown by measurement (issue 2, section 3):

- peak resident memory (VmHWM, measured in a fresh subprocess) grows by about the output's size,
  not the input's, while the same measurement of F.pad + F.conv grows by more than the input (a control
  that proves the method sees the copy);
- no aten op whose name mentions "pad" runs under the profiler, while the same check flags F.pad + F.conv.
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import fastpad
from reference import PADDING_MODES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20

# Run in a fresh interpreter: allocate and touch the big tensors, warm up on a tiny problem, then report
# the growth of the peak RSS across the one call being measured.
SCRIPT = r"""
import resource, sys
import torch
import torch.nn.functional as F
import fastpad

case, method = sys.argv[1], sys.argv[2]
ops = torch.ops.fastpad

def peak_bytes():
    # VmHWM: this process's own peak. ru_maxrss would also carry the peak of the process that forked this one
    # (Linux keeps it across exec), which hides the growth when the test runner itself is large.
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def problem(size):
    # (input channels, output channels, groups, padding_mode) per case; stride 2 'same' 3x3 everywhere
    c_in, c_out, groups, mode = {
        "depthwise": (16, 16, 16, "zeros"),
        "dense": (8, 8, 1, "zeros"),
        "reflect": (16, 16, 16, "reflect"),
        "grad_input": (16, 16, 16, "reflect"),
        "grad_weight": (16, 16, 16, "reflect"),
    }[case]
    x = torch.randn(1, c_in, size, size)
    w = torch.randn(c_out, c_in // groups, 3, 3)
    gy = torch.randn(1, c_out, size // 2, size // 2)
    return x, w, gy, groups, mode

def run(x, w, gy, groups, mode):
    pads = fastpad.same_padding(tuple(x.shape[2:]), 3, 2)
    pad_lo = [lo for lo, _ in pads]
    if method == "torch":  # the workaround fastpad replaces: a padded copy, then the conv
        flat = [p for lo_hi in reversed(pads) for p in lo_hi]
        xpad = F.pad(x, flat, mode="constant" if mode == "zeros" else mode)
        return F.conv2d(xpad, w, None, 2, 0, 1, groups)
    if case == "grad_input":
        return ops.conv_transpose(gy, w, None, [2, 2], pad_lo, list(x.shape[2:]), [1, 1], groups, mode)
    if case == "grad_weight":
        return ops.conv_weight_grad(x, gy, list(w.shape), [2, 2], pad_lo, [1, 1], groups, mode)
    return fastpad.conv2d(x, w, None, stride=2, padding="same", groups=groups, padding_mode=mode)

run(*problem(64))  # warm-up: loads kernels, thread pools, allocator state
args = problem(2048)
args[0].add_(1.0)  # touch every page of the input
args[2].add_(1.0)
before = peak_bytes()
out = run(*args)
after = peak_bytes()
print(after - before, args[0].nbytes, out.nbytes)
"""


def run_script(script, *arguments):
    """The integers a script prints last, run in a fresh interpreter that imports this checkout's fastpad."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", script, *arguments], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return [int(word) for word in result.stdout.split()[-3:]]


def measure(case, method):
    growth, input_bytes, output_bytes = run_script(SCRIPT, case, method)
    return growth, input_bytes, output_bytes


def describe(growth, input_bytes, output_bytes):
    return f"peak grew {growth / MiB:.0f} MiB (input {input_bytes / MiB:.0f} MiB, output {output_bytes / MiB:.0f} MiB)"


def assert_grows_by_output_only(case):
    """Growth within the output plus 1/8 of the input (allocator noise); a padded copy would add ~the input."""
    growth, input_bytes, output_bytes = measure(case, "fastpad")
    assert growth < output_bytes + input_bytes / 8, describe(growth, input_bytes, output_bytes)
    return output_bytes, input_bytes


@pytest.mark.parametrize("case", ["depthwise", "dense", "reflect"])
def test_forward_peak_memory_grows_by_output_not_input(case):
    output_bytes, input_bytes = assert_grows_by_output_only(case)
    assert output_bytes == input_bytes // 4  # stride 2 in both dims, as many output channels as input


@pytest.mark.parametrize("case", ["depthwise", "dense", "reflect"])
def test_control_pad_then_conv_grows_by_input(case):
    """The same measurement sees F.pad's copy: the method can tell the two apart."""
    growth, input_bytes, output_bytes = measure(case, "torch")
    assert growth > input_bytes, describe(growth, input_bytes, output_bytes)


@pytest.mark.parametrize("case", ["grad_input", "grad_weight"])
def test_backward_peak_memory(case):
    """conv's input gradient (conv_transpose folding the reflect pads back) allocates only the gradient, the
    size of the input; the weight gradient allocates next to nothing."""
    assert_grows_by_output_only(case)


# --------------------------------------------------------------------------------------------
# Long rows: no buffer grows with the row (docs/DESIGN.md section 5; their results: tests/test_long_rows.py).

# One forward call over `batch` x 64 x `length` float32 samples to `out_channels` channels (batch 2 and 64 channels
# unless a fifth and a fourth argument say otherwise), 'same' with 4 taps (pads (1, 2), fastpad's own kernels): the
# kernel path on one line, then the growth of the peak resident set, and the input's and output's bytes.
LONG_ROW_SCRIPT = r"""
import sys
import torch
import fastpad

def peak_bytes():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

op, padding_mode, length = sys.argv[1], sys.argv[2], int(sys.argv[3])
out_channels = int(sys.argv[4]) if len(sys.argv) > 4 else 64
batch = int(sys.argv[5]) if len(sys.argv) > 5 else 2
x = torch.randn(batch, 64, length)
if op == "conv1d":
    w = torch.randn(out_channels, 64, 4)
    pads = fastpad.same_padding((length,), 4, 1)
    print(torch.ops.fastpad._conv_path(x, w, None, [1], [pads[0][0]], [pads[0][1]], [1], 1, padding_mode, "cpu"))
else:
    w = torch.randn(64, out_channels, 4)
    print(torch.ops.fastpad._conv_transpose_path(x, w, None, [1], [1], [length], [1], 1, "zeros", "cpu"))
with torch.no_grad():
    before = peak_bytes()
    if op == "conv1d":
        y = fastpad.conv1d(x, w, padding="same", padding_mode=padding_mode)
    else:
        y = fastpad.conv_transpose1d(x, w, stride=1, padding="same")
    after = peak_bytes()
print(after - before, x.nbytes, y.nbytes)
"""
# Beyond the output: row-sized buffers would take 0.5 GiB per thread here (64 input channels of phase planes and 64
# output channels of accumulators, 4 bytes each, per sample); the tiles measured 8-11 MiB in all.
LONG_ROW_EXTRA_BOUND = 64 * MiB


# A transposed conv from 1024 x channels to 2 y channels, k2 s2, crop (1, 0): the GEMM + col2im (cpu_gemm_col2im_*),
# whose tiles of x positions are sized by the 2 x 2 values each writes (32768 positions): a copy of each tile's x
# columns would take 128 MiB per thread.
WIDE_TO_NARROW_SCRIPT = r"""
import sys
import torch
import fastpad

def peak_bytes():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

x, w = torch.randn(2, 1024, 1 << 16), torch.randn(1024, 2, 2)
path = torch.ops.fastpad._conv_transpose_path(x, w, None, [2], [1], [2 * x.shape[-1] - 1], [1], 1, "zeros", "cpu")
assert path.startswith("cpu_gemm_col2im"), path
with torch.no_grad():
    before = peak_bytes()
    y = fastpad.conv_transpose1d(x, w, stride=2, padding=((1, 0),))
    after = peak_bytes()
print(after - before, x.nbytes, y.nbytes)
"""


def test_peak_memory_of_a_wide_to_narrow_transposed_conv_is_bounded():
    """2 x 1024 x 65536 float32 samples to 2 channels: the peak grows by the output and less than 64 MiB besides."""
    growth, input_bytes, output_bytes = run_script(WIDE_TO_NARROW_SCRIPT)
    print(f"\nconv_transpose1d 1024 -> 2: {describe(growth, input_bytes, output_bytes)}")
    assert growth - output_bytes < LONG_ROW_EXTRA_BOUND, describe(growth, input_bytes, output_bytes)


@pytest.mark.parametrize("op, padding_mode", [("conv1d", "zeros"), ("conv1d", "reflect"),
                                              ("conv_transpose1d", "zeros")])
def test_peak_memory_of_a_long_row_is_bounded(op, padding_mode):
    """2 x 64 x 1M float32 samples: the peak grows by the output and less than 64 MiB besides."""
    growth, input_bytes, output_bytes = run_script(LONG_ROW_SCRIPT, op, padding_mode, str(1 << 20))
    print(f"\n{op} {padding_mode}: {describe(growth, input_bytes, output_bytes)}")
    assert growth - output_bytes < LONG_ROW_EXTRA_BOUND, describe(growth, input_bytes, output_bytes)


# --------------------------------------------------------------------------------------------
# The profiler: no pad op runs, and the fastpad ops do.


def pad_events(fn):
    """(all event names, names of events that look like padding ops) recorded while fn runs."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    names = {event.name for event in prof.events()}
    return names, sorted(n for n in names if "pad" in n.lower().replace("fastpad", ""))


def conv_forward_backward(mode):
    x = torch.randn(2, 8, 13, 12, requires_grad=True)
    w = torch.randn(8, 4, 3, 3, requires_grad=True)
    b = torch.randn(8, requires_grad=True)
    y = fastpad.conv2d(x, w, b, stride=2, padding="same", groups=2, padding_mode=mode)
    y.square().sum().backward()


def conv_transpose_forward_backward():
    x = torch.randn(2, 8, 5, 6, requires_grad=True)
    w = torch.randn(8, 3, 4, 4, requires_grad=True)
    y = fastpad.conv_transpose2d(x, w, None, stride=2, padding="same")
    y.square().sum().backward()


@pytest.mark.parametrize("mode", PADDING_MODES)
def test_profiler_sees_no_pad_ops_in_conv(mode):
    names, padding_ops = pad_events(lambda: conv_forward_backward(mode))
    for op in ("fastpad::conv", "fastpad::conv_transpose", "fastpad::conv_weight_grad"):
        assert op in names, f"the profiler did not record {op}: {sorted(names)}"
    assert not padding_ops, f"padding ops ran: {padding_ops}"


def test_profiler_sees_no_pad_ops_in_conv_transpose():
    names, padding_ops = pad_events(conv_transpose_forward_backward)
    for op in ("fastpad::conv_transpose", "fastpad::conv", "fastpad::conv_weight_grad"):
        assert op in names, f"the profiler did not record {op}: {sorted(names)}"
    assert not padding_ops, f"padding ops ran: {padding_ops}"


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_profiler_control_sees_f_pad(mode):
    x, w = torch.randn(2, 8, 13, 12), torch.randn(8, 8, 3, 3)
    _, padding_ops = pad_events(lambda: F.conv2d(F.pad(x, [1, 1, 0, 1], mode=mode), w, stride=2))
    assert padding_ops, "the check must flag F.pad"
