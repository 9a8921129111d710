"""The public functions' eager calls (csrc/eager_calls.cpp): plain tensors and nn.Parameters go through fastpad._C,
tensor subclasses with __torch_function__ and torch function modes through torch.ops, with the same results; calls
that record no backward skip autograd's Function (csrc/autograd.cpp), calls that do record it."""

import pytest
import torch
from torch.overrides import TorchFunctionMode

import fastpad
from fastpad import functional
from reference import assert_matches, conv_inputs, expected_conv, expected_conv_transpose, poison


class RecordingC:
    """Stands in for fastpad._C in fastpad.functional: records what each eager call returned."""

    def __init__(self, real):
        self.real, self.returned = real, []

    def conv(self, *args):
        return self.record(self.real.conv(*args))

    def conv_transpose(self, *args):
        return self.record(self.real.conv_transpose(*args))

    def record(self, output):
        self.returned.append("torch.ops" if output is NotImplemented else "fastpad._C")
        return output


@pytest.fixture
def recorded(monkeypatch):
    recording = RecordingC(functional._C)
    monkeypatch.setattr(functional, "_C", recording)
    return recording.returned


class LoggedTensor(torch.Tensor):
    """A tensor subclass whose __torch_function__ logs the functions it sees."""
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


class LoggingMode(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        return func(*args, **(kwargs or {}))


def conv_case(channels_last=False):
    x, w, b = conv_inputs((9, 8), c_in=4, c_out=6, kernel=3, groups=2, dtype=torch.float32)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    return x, w, b, dict(stride=2, padding="same", groups=2, padding_mode="reflect")


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("weight_kind", ["tensor", "parameter"])
def test_plain_tensors_and_parameters_take_the_direct_call(recorded, channels_last, weight_kind):
    x, w, b, kwargs = conv_case(channels_last)
    if weight_kind == "parameter":
        w, b = torch.nn.Parameter(w), torch.nn.Parameter(b)
    poison((2, 6, 5, 4))
    with torch.no_grad():
        y = fastpad.conv2d(x, w, b, **kwargs)
    assert recorded == ["fastpad._C"]
    assert y.grad_fn is None and not y.requires_grad
    assert_matches(y, expected_conv(x, w, b, **kwargs).float())


def test_conv_transpose_takes_the_direct_call(recorded):
    x, w, b = conv_inputs((5, 6), c_in=4, c_out=6, kernel=4, groups=2, transposed=True, dtype=torch.float32)
    kwargs = dict(stride=2, padding="same", groups=2)
    poison((2, 6, 10, 12))
    y = fastpad.conv_transpose2d(x, w, b, **kwargs)
    assert recorded == ["fastpad._C"]
    assert_matches(y, expected_conv_transpose(x, w, b, **kwargs).float())


def test_the_direct_call_records_the_backward(recorded):
    x, w, b, kwargs = conv_case()
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    y = fastpad.conv2d(*leaves, **kwargs)
    assert recorded == ["fastpad._C"] and y.grad_fn is not None
    grad = torch.randn_like(y)
    y.backward(grad)
    reference = [t.detach().double().requires_grad_() for t in (x, w, b)]
    expected_conv(*reference, **kwargs).backward(grad.double())
    for name, mine, theirs in zip(("input", "weight", "bias"), leaves, reference):
        assert_matches(mine.grad, theirs.grad.float(), what=f"{name} gradient")


def test_a_subclass_with_torch_function_goes_through_torch_ops(recorded):
    x, w, b, kwargs = conv_case()
    LoggedTensor.seen.clear()
    y = fastpad.conv2d(x.as_subclass(LoggedTensor), w, b, **kwargs)
    assert recorded == ["torch.ops"]
    assert torch.ops.fastpad.conv in LoggedTensor.seen
    assert_matches(y.as_subclass(torch.Tensor), expected_conv(x, w, b, **kwargs).float())


def test_a_torch_function_mode_sees_the_op():
    x, w, b, kwargs = conv_case()
    with LoggingMode() as mode:
        y = fastpad.conv2d(x, w, b, **kwargs)
    assert torch.ops.fastpad.conv in mode.seen
    assert_matches(y, expected_conv(x, w, b, **kwargs).float())


@pytest.mark.parametrize("bad", ["stride_tuple", "groups_bool"])
def test_arguments_of_other_types_get_not_implemented(bad):
    """functional.py hands lists of ints and an int: anything else is left to torch.ops' schema checks."""
    x, w, _, _ = conv_case()
    stride = (2, 2) if bad == "stride_tuple" else [2, 2]
    groups = True if bad == "groups_bool" else 2
    output = fastpad._C.conv(x, w, None, stride, [1, 1], [1, 1], [1, 1], groups, "zeros")
    if bad == "stride_tuple":  # a tuple of ints is read like a list
        assert isinstance(output, torch.Tensor)
    else:
        assert output is NotImplemented


def test_a_wrong_argument_count_raises_a_type_error():
    x, w, _, _ = conv_case()
    with pytest.raises(TypeError, match="takes 9 arguments, got 8"):
        fastpad._C.conv(x, w, None, [2, 2], [1, 1], [1, 1], [1, 1], 2)


def test_a_kernel_error_keeps_its_message():
    x, w, _, _ = conv_case()
    with pytest.raises(RuntimeError, match="padding_mode must be"):
        fastpad._C.conv(x, w, None, [2, 2], [1, 1], [1, 1], [1, 1], 2, "mirror")


def test_a_forward_mode_gradient_is_refused_not_dropped():
    """A tangent is not skipped with the backward: the op still goes to autograd's Function, which refuses it."""
    import torch.autograd.forward_ad as forward_ad

    x, w, b, kwargs = conv_case()
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, torch.randn_like(x))
        with torch.no_grad(), pytest.raises(RuntimeError, match="jvp is not implemented"):
            fastpad.conv2d(dual, w, b, **kwargs)
