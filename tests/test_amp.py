"""torch.autocast: the fastpad ops behave like torch's convolutions (CPU bfloat16/float16, CUDA float16/bfloat16).

Inside autocast they run in the autocast dtype whatever mix of float32 and low-precision tensors they get, leave
float64 alone, return gradients in the leaves' own dtype, and match torch's autocast conv on the same input.
"""
import pytest
import torch
import torch.nn.functional as F

import fastpad
from reference import DEVICES, expected_conv, expected_conv_transpose, relative_error

AUTOCAST_DTYPES = {"cpu": (torch.bfloat16, torch.float16), "cuda": (torch.float16, torch.bfloat16)}
CASES = [(device, dtype) for device in DEVICES for dtype in AUTOCAST_DTYPES[device]]
IDS = [f"{device}-{str(dtype).replace('torch.', '')}" for device, dtype in CASES]


def rounded(tensor, dtype):
    """The values autocast feeds the kernel: rounded to `dtype`, then held in float64 for the reference."""
    return None if tensor is None else tensor.to(dtype).double()


@pytest.mark.parametrize("device, dtype", CASES, ids=IDS)
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect"])
def test_conv_runs_in_the_autocast_dtype(device, dtype, padding_mode):
    x = torch.randn(2, 6, 13, 10, device=device)
    w = torch.randn(8, 6, 3, 3, device=device)
    b = torch.randn(8, device=device)
    with torch.autocast(device, dtype=dtype):
        y = fastpad.conv2d(x, w, b, stride=2, padding_mode=padding_mode)
        torch_y = F.conv2d(x, w, b, 2, 1)  # what torch's own conv returns under the same autocast
    assert y.dtype == torch_y.dtype == dtype
    expected = expected_conv(rounded(x, dtype), rounded(w, dtype), rounded(b, dtype), stride=2,
                             padding_mode=padding_mode)
    assert relative_error(y.double(), expected) < 1e-2


@pytest.mark.parametrize("device, dtype", CASES, ids=IDS)
def test_conv_transpose_runs_in_the_autocast_dtype(device, dtype):
    x = torch.randn(2, 6, 7, 5, device=device)
    w = torch.randn(6, 4, 4, 4, device=device)
    b = torch.randn(4, device=device)
    with torch.autocast(device, dtype=dtype):
        y = fastpad.conv_transpose2d(x, w, b, stride=2)
    assert y.dtype == dtype
    expected = expected_conv_transpose(rounded(x, dtype), rounded(w, dtype), rounded(b, dtype), stride=2)
    assert relative_error(y.double(), expected) < 1e-2


@pytest.mark.parametrize("device, dtype", CASES, ids=IDS)
def test_mixed_input_dtypes_are_cast(device, dtype):
    """A low-precision activation meets float32 weights, as between layers of an autocast model."""
    x = torch.randn(2, 4, 9, 9, device=device, dtype=dtype)
    w = torch.randn(4, 1, 3, 3, device=device)
    with torch.autocast(device, dtype=dtype):
        y = fastpad.conv2d(x, w, groups=4, stride=2)
    assert y.dtype == dtype
    with pytest.raises(TypeError, match="weight has dtype"):  # outside autocast, a mismatch is still an error
        fastpad.conv2d(x, w, groups=4)


@pytest.mark.parametrize("device, dtype", CASES, ids=IDS)
def test_float64_is_left_alone(device, dtype):
    x = torch.randn(1, 3, 8, 8, device=device, dtype=torch.float64)
    w = torch.randn(5, 3, 3, 3, device=device, dtype=torch.float64)
    with torch.autocast(device, dtype=dtype):
        assert fastpad.conv2d(x, w, stride=2).dtype == torch.float64
        assert F.conv2d(x, w).dtype == torch.float64


@pytest.mark.parametrize("device, dtype", CASES, ids=IDS)
@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")
def test_training_step_under_autocast(device, dtype):
    """Gradients reach the float32 parameters in float32 and match the same step with torch's layers."""
    torch_layers = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, padding="same"), torch.nn.ReLU(),
                                       torch.nn.ConvTranspose2d(8, 4, 2, stride=2)).to(device)
    layers = torch.nn.Sequential(fastpad.nn.Conv2d(3, 8, 4), torch.nn.ReLU(),
                                 fastpad.nn.ConvTranspose2d(8, 4, 2, stride=2)).to(device)
    layers.load_state_dict(torch_layers.state_dict())
    x = torch.randn(2, 3, 12, 12, device=device)
    grads = []
    for model in (layers, torch_layers):
        with torch.autocast(device, dtype=dtype):
            out = model(x)
        assert out.dtype == dtype
        out.float().square().mean().backward()
        assert all(p.grad.dtype == torch.float32 for p in model.parameters())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert relative_error(grads[0].double(), grads[1].double()) < 3e-2


def test_autocast_disabled_region_runs_in_float32():
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.autocast("cpu", enabled=False):
            assert fastpad.conv2d(x, w).dtype == torch.float32
