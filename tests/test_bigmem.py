"""Tensors above 2^31 elements (the bigmem marker): the kernels index with int64, so offsets past int32 stay right.

Run with `pytest -m bigmem` (or FASTPAD_BIGMEM=1), one test at a time (no pytest -n): each holds up to about
14 GB. Every element of every output is compared with a float64 reference computed chunk by chunk (a slice of
images, or a slice of a long row plus the halo it reads), which also keeps the reference's memory small. There is
no poisoning: on the CPU, tensors this large come straight from the OS, zero-filled, and the per-element check
catches an unwritten zero.
"""

import gc
import math
import resource
import sys

import pytest
import torch

import fastpad
from reference import (
    conv_out_size,
    expected_conv,
    expected_conv_transpose,
    reference_conv,
    resolve_pads,
    same_pads,
    tolerance,
)

INT32_LIMIT = 2**31  # the first element count an int32 index cannot reach
GiB = 1 << 30
# The most this process may grow by during a test on the CPU (the machines that run it have 24 GiB).
HOST_MEMORY_BUDGET = 20 * GiB
# Elements drawn at a time when filling a huge tensor.
RANDOM_CHUNK = 1 << 26
# Output elements compared at a time: small enough that the float64 reference's temporaries (torch's im2col buffers
# included, about 100 bytes per element) stay under glibc's 32 MiB mmap threshold and are reused, not page-faulted
# afresh for every chunk.
REFERENCE_CHUNK = 1 << 18


def proc_bytes(path, field):
    """A size in bytes from /proc/self/status or /proc/meminfo, which give kB."""
    with open(path) as lines:
        return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(field + ":"))


@pytest.fixture
def host_memory_budget(device):
    """While a CPU test runs, caps this process's address space at its size now plus HOST_MEMORY_BUDGET (less when
    the machine has less available), so that a kernel needing far more memory than planned raises MemoryError
    instead of waking the OOM killer. Afterwards it frees a failed test's tensors, which the next test would
    otherwise find still held by the traceback pytest keeps for post-mortem debugging (sys.last_traceback)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if device == "cpu":
        budget = min(HOST_MEMORY_BUDGET, proc_bytes("/proc/meminfo", "MemAvailable") - GiB)
        limit = proc_bytes("/proc/self/status", "VmSize") + budget
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
        gc.collect()  # the exception, its traceback and the frames form cycles


def random_tensor(shape, dtype, device, channels_last=False):
    """Fresh standard-normal values, drawn in place a slice of storage at a time (no full-size temporary)."""
    flat = torch.empty(math.prod(shape), dtype=dtype, device=device)
    for start in range(0, flat.numel(), RANDOM_CHUNK):
        flat[start:start + RANDOM_CHUNK].normal_()
    if channels_last:  # stored [N, *spatial, C], seen as [N, C, *spatial]
        return flat.view(shape[0], *shape[2:], shape[1]).movedim(-1, 1)
    return flat.view(shape)


def assert_every_element_close(actual, expected, dtype, what):
    """docs/DESIGN.md section 7's check on one chunk: relative error by norm within tolerance (NaN or inf fails it), and
    the same tolerance per element, relative to |expected| plus the chunk's RMS, so that one unwritten or misplaced
    element among millions cannot hide in the norm. One float64 difference serves both (chunks are large)."""
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype} != {dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    difference = actual.double().sub_(expected)
    expected_norm = torch.linalg.vector_norm(expected)
    error = (torch.linalg.vector_norm(difference) / expected_norm).item()
    assert error <= tolerance(dtype), f"{what}: relative error {error:.3g} > {tolerance(dtype):.1g} ({dtype})"
    rms = expected_norm / math.sqrt(expected.numel())
    excess = difference.abs_().div_(expected.abs().add_(rms))
    worst = excess.argmax()
    if excess.flatten()[worst] > tolerance(dtype):
        index = tuple(int(i) for i in torch.unravel_index(worst, excess.shape))
        raise AssertionError(f"{what}: element {index} of the chunk is {actual[index].item()}, "
                             f"reference {expected[index].item()}")


def image_chunks(batch, elements_per_image):
    """[first, stop) ranges of images holding about REFERENCE_CHUNK elements each (at least one image)."""
    step = max(1, REFERENCE_CHUNK // elements_per_image)
    return [(first, min(first + step, batch)) for first in range(0, batch, step)]


def batch_over_int32(elements_per_image):
    """The smallest batch whose tensor has more than 2^31 elements: its last image reaches past int32."""
    return INT32_LIMIT // elements_per_image + 1


@pytest.mark.bigmem
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_conv1d_single_plane_longer_than_int32(device, padding_mode, host_memory_budget):
    """One plane of 2^31 + 4099 samples: the spatial position itself overflows int32, in the input and in the
    ('same', stride 1) output, and the padding mode resolves both global ends of the row."""
    length, kernel, dtype = INT32_LIMIT + 4099, 4, torch.float16
    pad_lo, pad_hi = same_pads(length, kernel, 1, 1)
    x = random_tensor((1, 1, length), dtype, device)
    w = torch.randn(1, 1, kernel, dtype=dtype, device=device)
    b = torch.randn(1, dtype=dtype, device=device)
    y = fastpad.conv1d(x, w, b, padding="same", padding_mode=padding_mode)
    assert y.shape == x.shape
    for start in range(0, length, REFERENCE_CHUNK):
        stop = min(start + REFERENCE_CHUNK, length)
        # Outputs [start, stop) read input positions [first, last); the mode pads only where that leaves the row.
        first, last = start - pad_lo, stop - pad_lo + kernel - 1
        piece = x[..., max(first, 0):min(last, length)].double()
        pads = [(max(-first, 0), max(last - length, 0))]
        expected = reference_conv(piece, w.double(), b.double(), [1], pads, [1], 1, padding_mode)
        assert_every_element_close(y[..., start:stop], expected, dtype, f"outputs [{start}, {stop})")


# channels_last, input channels, output channels, groups, padding_mode: the dense tap-GEMM kernels and the
# depthwise kernels, each in both layouts, each with another padding mode.
BATCH_CASES = {
    "nchw_dense_zeros": (False, 16, 16, 1, "zeros"),
    "channels_last_dense_reflect": (True, 16, 16, 1, "reflect"),
    "nchw_depthwise_replicate": (False, 16, 16, 16, "replicate"),
    "channels_last_depthwise_circular": (True, 16, 16, 16, "circular"),
}


@pytest.mark.bigmem
@pytest.mark.parametrize("case", BATCH_CASES)
def test_conv2d_batch_larger_than_int32(device, case, host_memory_budget):
    """Small 45x47 planes, but N*C*H*W of input and output is past 2^31: the offsets of the last images overflow
    int32 ('same', stride 1, a 3x2 kernel, so the W pads are asymmetric)."""
    channels_last, c_in, c_out, groups, padding_mode = BATCH_CASES[case]
    height, width, dtype = 45, 47, torch.bfloat16
    batch = batch_over_int32(c_in * height * width)
    x = random_tensor((batch, c_in, height, width), dtype, device, channels_last)
    w = torch.randn(c_out, c_in // groups, 3, 2, dtype=dtype, device=device)
    b = torch.randn(c_out, dtype=dtype, device=device)
    y = fastpad.conv2d(x, w, b, padding="same", groups=groups, padding_mode=padding_mode)
    assert x.numel() > INT32_LIMIT and y.numel() > INT32_LIMIT
    assert y.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    for first, stop in image_chunks(batch, c_out * height * width):
        expected = expected_conv(x[first:stop], w, b, padding="same", groups=groups, padding_mode=padding_mode)
        assert_every_element_close(y[first:stop], expected, dtype, f"output images [{first}, {stop})")


@pytest.mark.bigmem
def test_conv_transpose1d_output_larger_than_int32(device, host_memory_budget):
    """A stride-2 'same' transposed conv1d whose N*C*L output is past 2^31 elements (its input half that): the
    output offsets of the last images overflow int32."""
    channels, length, kernel, dtype = 16, 1001, 4, torch.float32
    batch = batch_over_int32(channels * 2 * length)
    x = random_tensor((batch, channels, length), dtype, device)
    w = torch.randn(channels, channels, kernel, dtype=dtype, device=device)
    b = torch.randn(channels, dtype=dtype, device=device)
    y = fastpad.conv_transpose1d(x, w, b, stride=2, padding="same")
    assert y.shape == (batch, channels, 2 * length) and y.numel() > INT32_LIMIT
    for first, stop in image_chunks(batch, channels * 2 * length):
        expected = expected_conv_transpose(x[first:stop], w, b, stride=2, padding="same")
        assert_every_element_close(y[first:stop], expected, dtype, f"output images [{first}, {stop})")


# The conv whose gradients are checked: 16 -> 2 channels, 3x3, stride 2, 'same' with reflect padding (pads (1, 1)
# along H and (0, 1) along W), over 45x46 images, as many as make the conv's input larger than 2^31 elements.
GRADIENT_CHANNELS = (16, 2)
GRADIENT_IMAGE = (45, 46)
GRADIENT_CONV = dict(stride=2, padding="same", padding_mode="reflect")


@pytest.mark.bigmem
def test_conv2d_input_gradient_larger_than_int32(device, host_memory_budget):
    """The input gradient of the conv above, more than 2^31 elements: conv_transpose, folding the reflected taps
    back, writes offsets past int32. The test calls the op the backward calls (fastpad/_ops.py) rather than going
    through autograd, so the conv's input itself never exists: half the memory."""
    (c_in, c_out), (height, width), dtype = GRADIENT_CHANNELS, GRADIENT_IMAGE, torch.float32
    batch = batch_over_int32(c_in * height * width)
    pads = resolve_pads("same", GRADIENT_IMAGE, 3, 2, 1)
    out_size = [conv_out_size(size, lo, hi, 3, 2, 1) for size, (lo, hi) in zip(GRADIENT_IMAGE, pads)]
    grad_y = random_tensor((batch, c_out, *out_size), dtype, device)
    w = torch.randn(c_out, c_in, 3, 3, dtype=dtype, device=device)
    grad_x = torch.ops.fastpad.conv_transpose(grad_y, w, None, [2, 2], [lo for lo, _ in pads], [height, width],
                                              [1, 1], 1, "reflect")
    assert grad_x.shape == (batch, c_in, height, width) and grad_x.numel() > INT32_LIMIT
    for first, stop in image_chunks(batch, c_in * height * width):
        # The conv is linear in its input, so its input gradient is the same at every input: here a random one.
        x64 = torch.randn(stop - first, c_in, height, width, dtype=torch.float64, device=device, requires_grad=True)
        (expected,) = torch.autograd.grad(expected_conv(x64, w, **GRADIENT_CONV), x64, grad_y[first:stop].double())
        assert_every_element_close(grad_x[first:stop], expected, dtype, f"input gradient images [{first}, {stop})")


@pytest.mark.bigmem
def test_conv2d_weight_gradient_over_input_larger_than_int32(device, host_memory_budget):
    """The weight and bias gradients of the conv above, through autograd: conv_weight_grad reduces over an input of
    more than 2^31 elements, reading offsets past int32. The forward output is checked on the way."""
    (c_in, c_out), (height, width), dtype = GRADIENT_CHANNELS, GRADIENT_IMAGE, torch.float32
    batch = batch_over_int32(c_in * height * width)
    x = random_tensor((batch, c_in, height, width), dtype, device)
    w = torch.randn(c_out, c_in, 3, 3, dtype=dtype, device=device, requires_grad=True)
    b = torch.randn(c_out, dtype=dtype, device=device, requires_grad=True)
    y = fastpad.conv2d(x, w, b, **GRADIENT_CONV)
    grad_y = torch.randn_like(y)
    grad_w, grad_b = torch.autograd.grad(y, (w, b), grad_y)
    assert x.numel() > INT32_LIMIT

    w64, b64 = (t.detach().double().requires_grad_() for t in (w, b))
    expected_grad_w, expected_grad_b = torch.zeros_like(w64), torch.zeros_like(b64)
    for first, stop in image_chunks(batch, c_in * height * width):
        expected = expected_conv(x[first:stop], w64, b64, **GRADIENT_CONV)
        assert_every_element_close(y[first:stop].detach(), expected.detach(), dtype, f"output images [{first}, {stop})")
        grad_w_part, grad_b_part = torch.autograd.grad(expected, (w64, b64), grad_y[first:stop].double())
        expected_grad_w += grad_w_part
        expected_grad_b += grad_b_part
    assert_every_element_close(grad_w, expected_grad_w, dtype, "weight gradient")
    assert_every_element_close(grad_b, expected_grad_b, dtype, "bias gradient")
