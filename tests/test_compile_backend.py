"""The graph rewrite of `torch.compile(backend="fastpad")` and `fastpad.convert(model, example_inputs=...)`.

Every pattern it fuses, and every near miss it must leave alone, runs in float64 against the eager model at several
input sizes, forward and backward, on the graphs of both torch.compile (Dynamo's) and torch.export. Most tests run the
rewritten Dynamo graph through AOTAutograd without inductor (`RewriteAndTrace`): that gives the forward and backward
graphs to count pad ops in, without a C++ compile per test. One test runs the whole backend, inductor included.
"""
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo.backends.common import aot_autograd

import fastpad
from fastpad._graph_fusion import count_pad_ops, fuse_padded_convolutions
from reference import relative_error
from test_compile_export import FAST_INDUCTOR, NO_GRAPH_CACHES, CompletedCompiles

SIZES = [(11, 14, 7), (16, 16, 8), (13, 9, 10)]  # odd, even, mixed: the "same" pads and crops follow the parity


class RewriteAndTrace:
    """A Dynamo backend: the fastpad rewrite, then AOTAutograd, recording the rewrite's results and the pad ops left
    in the forward and backward graphs; the graphs then run eagerly."""

    def __init__(self):
        self.fusions = []
        self.pad_ops = {"forward": 0, "backward": 0}

    def __call__(self, graph_module, example_inputs):
        fusions = fuse_padded_convolutions(graph_module, inductor_layout=True)  # as the backend calls it

        def recorder(kind):
            def compiler(graph, inputs):
                self.pad_ops[kind] += count_pad_ops(graph.graph)
                return graph
            return compiler

        compiled = aot_autograd(fw_compiler=recorder("forward"), bw_compiler=recorder("backward"))(graph_module,
                                                                                                 example_inputs)
        # Only now: Dynamo abandons an attempt that raises in here (it restarts with Python floats specialised, as
        # for the 0.0 of nn.ZeroPad2d under dynamic=True), and its graph is no compile.
        self.fusions.append(fusions)
        return compiled

    @property
    def fused(self) -> int:
        return sum(len(f.replaced) for f in self.fusions)

    @property
    def skipped(self):
        return [reason for f in self.fusions for _, reason in f.skipped]


def outputs_and_grads(model, x):
    x = x.clone().requires_grad_(True)
    out = model(x)
    grads = torch.autograd.grad(out.square().sum(), [x, *model.parameters()])
    return out.detach(), grads


def assert_same(got, expected, tol=1e-12):
    for g, e in zip(got, expected):
        if isinstance(g, (tuple, list)):
            assert_same(g, e, tol)
        else:
            assert g.shape == e.shape and relative_error(g, e) < tol


def compile_and_check(model, channels=3, sizes=SIZES, nd=2):
    """Compiles `model` (dynamic shapes) with the rewrite, checks outputs and gradients against eager at every size
    and that one graph served them all. Returns the backend."""
    torch._dynamo.reset()
    model = model.double()
    backend = RewriteAndTrace()
    compiled = torch.compile(model, backend=backend, dynamic=True, fullgraph=True)
    for size in sizes:
        x = torch.randn(2, channels, *size[:nd], dtype=torch.float64)
        assert_same(outputs_and_grads(compiled, x), outputs_and_grads(model, x))
    assert len(backend.fusions) == 1, f"{len(backend.fusions)} graphs compiled for {len(sizes)} sizes"
    return backend


def export_and_check(model, channels=3, sizes=SIZES, nd=2):
    """fastpad.convert(model, example_inputs=...): checks outputs and gradients at every size; returns the report."""
    model = model.double()
    x = torch.randn(2, channels, *sizes[0][:nd], dtype=torch.float64)
    converted, report = fastpad.convert(model, example_inputs=x, return_report=True)
    for size in sizes:
        x = torch.randn(2, channels, *size[:nd], dtype=torch.float64)
        assert_same(outputs_and_grads(converted, x), outputs_and_grads(model, x))
    return report


class Functional(nn.Module):
    """`forward(x)` with convolution weights of the given shapes; `body(self, x, *weights)` is the computation."""

    def __init__(self, body, *weight_shapes):
        super().__init__()
        self.body = body
        self.weights = nn.ParameterList(nn.Parameter(torch.randn(shape) / 4) for shape in weight_shapes)

    def forward(self, x):
        return self.body(x, *self.weights)


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TRANSPOSED = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def tf_same_pads(x, kernel, stride):
    """TF 'SAME' pads computed from the symbolic input size, in F.pad order, as HF's and Keras's ports write them."""
    pads = []
    for size in reversed(x.shape[2:]):
        total = max((size + stride - 1) // stride * stride - stride + kernel - size, 0)
        pads += [total // 2, total - total // 2]
    return pads


# Fused: (model, spatial dims, expected fusions).
FUSED = {
    "zeros-1d": (lambda: Functional(lambda x, w: CONV[1](F.pad(x, (2, 1)), w, stride=2), (4, 3, 4)), 1, 1),
    "zeros-3d": (lambda: Functional(lambda x, w: CONV[3](F.pad(x, (0, 1, 1, 0, 2, 1)), w, stride=2),
                                    (4, 3, 3, 2, 3)), 3, 1),
    "only-last-dim": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (0, 2)), w), (4, 3, 3, 3)), 2, 1),
    "plus-conv-padding": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (0, 1, 2, 0)), w, padding=(1, 2)),
                                             (4, 3, 3, 3)), 2, 1),
    "reflect": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (1, 2, 2, 1), mode="reflect"), w, stride=2),
                                   (4, 3, 3, 3)), 2, 1),
    "replicate-1d": (lambda: Functional(lambda x, w: CONV[1](F.pad(x, (3, 0), mode="replicate"), w), (4, 3, 4)), 1, 1),
    "circular-grouped": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (1, 1, 0, 2), mode="circular"), w,
                                                                 groups=3), (6, 1, 3, 3)), 2, 1),
    "groups-from-channels": (lambda: Functional(  # as Keras computes groups: dynamic under torch.export
        lambda x, w: CONV[2](F.pad(x, (1, 0, 0, 1)), w, stride=2, groups=x.shape[1] // w.shape[1]), (6, 1, 3, 3)), 2, 1),
    "tf-same-symbolic": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, tf_same_pads(x, 3, 2)), w, stride=2),
                                            (4, 3, 3, 3)), 2, 1),
    "module-padding-modes": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
                                                   nn.Conv2d(4, 4, 3, stride=2, padding=(1, 2),
                                                             padding_mode="circular")), 2, 2),
    "module-same-even-kernel": (lambda: nn.Conv2d(3, 4, (4, 3), padding="same", dilation=(1, 2)), 2, 1),
    "transposed-crop": (lambda: Functional(lambda x, w: TRANSPOSED[2](x, w, stride=2)[:, :, 1:-1, 0:-2],
                                           (3, 4, 3, 4)), 2, 1),
    "transposed-crop-1d-torch-padding": (lambda: Functional(
        lambda x, w: TRANSPOSED[1](x, w, stride=3, padding=1, output_padding=2)[:, :, 2:], (3, 2, 5)), 1, 1),
    "transposed-module-crop-3d": (lambda: CroppedTransposed(nn.ConvTranspose3d(3, 2, 3, stride=2)), 3, 1),
    "transposed-crop-then-zero-pad": (lambda: Functional(  # Keras's negative crop: kernel 1 < stride 2
        lambda x, w: F.pad(TRANSPOSED[2](x, w, stride=2)[:, :, :, 0:], (0, 1, 0, 1)), (3, 4, 1, 1)), 2, 1),
}


class CroppedTransposed(nn.Module):
    """A torch.nn transposed conv, then a crop of its output as Keras writes it."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        return self.conv(x)[:, :, 1:, :-1, 0:-1]


LEFT_ALONE = {  # (model, spatial dims, the reason recorded, or None where the pattern is not one at all)
    "nonzero-value": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (1, 1, 1, 1), value=0.5), w), (4, 3, 3, 3)),
                      2, "value 0.5"),
    "channel-dim": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (1, 1, 1, 1, 1, 0)), w), (4, 5, 3, 3)),
                    2, "batch or channel"),
    "negative": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (-1, 2, 0, 1)), w), (4, 3, 3, 3)), 2, "negative"),
    "other-user": (lambda: Functional(lambda x, w: (lambda p: CONV[2](p, w).sum() + p.sum())(F.pad(x, (1, 0, 0, 1))),
                                      (4, 3, 3, 3)), 2, None),
    "reflect-then-zeros": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (1, 1, 1, 1), mode="reflect"), w,
                                                                  padding=1), (4, 3, 3, 3)), 2, "not one padding"),
    "transposed-strided-slice": (lambda: Functional(lambda x, w: TRANSPOSED[2](x, w, stride=2)[:, :, 1::2],
                                                    (3, 4, 3, 3)), 2, None),
    "transposed-channel-slice": (lambda: Functional(lambda x, w: TRANSPOSED[2](x, w, stride=2)[:, 1:], (3, 4, 3, 3)),
                                 2, None),
    "transposed-negative-start": (lambda: Functional(lambda x, w: TRANSPOSED[1](x, w, stride=2)[:, :, -5:],
                                                     (3, 4, 3)), 1, "not a window"),
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_under_compile(name):
    make, nd, fused = FUSED[name]
    model = make()
    backend = compile_and_check(model, channels=3, nd=nd)
    assert backend.fused == fused and not backend.skipped
    assert backend.pad_ops == {"forward": 0, "backward": 0}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_by_convert_with_example_inputs(name):
    make, nd, fused = FUSED[name]
    report = export_and_check(make(), channels=3, nd=nd)
    assert len(report.replaced) == fused and not report.skipped and report.pad_ops_left == 0
    assert report.path.startswith("modules, then the torch.export graph")


SYMMETRIC = {  # a zero pad equal on both sides: (model, the op under compile, the op convert chooses for NCHW)
    "dense": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (1, 1, 2, 2)), w, stride=2), (4, 3, 3, 3)),
              "torch convolution", "torch convolution"),
    "plus-conv-padding-1d": (lambda: Functional(lambda x, w: CONV[1](F.pad(x, (1, 1)), w, padding=1), (4, 3, 5)),
                             "torch convolution", "torch convolution"),
    "all-zero": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (0, 0, 0, 0)), w), (4, 3, 1, 1)),
                 "torch convolution", "torch convolution"),
    # fastpad's NCHW depthwise kernel beats torch's; inductor runs convolutions channels_last, where oneDNN's wins
    "depthwise": (lambda: Functional(lambda x, w: CONV[2](F.pad(x, (1, 1, 1, 1)), w, groups=3), (6, 1, 3, 3)),
                  "torch convolution", "fastpad.conv"),
}


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
def test_symmetric_zero_pad(name):
    """The pad goes either way; which op takes it follows the layout the convolution will run in."""
    make, compiled_op, converted_op = SYMMETRIC[name]
    nd = 1 if name.endswith("1d") else 2
    backend = compile_and_check(make(), channels=3, nd=nd)
    assert backend.fused == 1 and backend.pad_ops == {"forward": 0, "backward": 0}
    assert backend.fusions[0].replaced[0].fused.startswith(compiled_op)
    report = export_and_check(make(), channels=3, nd=nd)
    assert len(report.replaced) == 1 and report.pad_ops_left == 0
    assert report.replaced[0].fused.startswith(converted_op)


@pytest.mark.parametrize("name", sorted(LEFT_ALONE))
def test_left_alone(name):
    make, nd, reason = LEFT_ALONE[name]
    model = make()
    channels = 4 if name == "channel-dim" else 3
    for check in (compile_and_check, export_and_check):
        result = check(model, channels=channels, nd=nd)
        replaced = result.fused if check is compile_and_check else len(result.replaced)
        skipped = result.skipped if check is compile_and_check else [r for _, r in result.skipped]
        assert replaced == 0
        if reason is None:
            assert not skipped
        else:
            assert len(skipped) == 1 and reason in skipped[0]


def test_entry_point_needs_no_import():
    """`torch.compile(backend="fastpad")` in a fresh process whose code never imports fastpad."""
    script = (
        "import sys, torch\n"
        "from torch._inductor import config\n"
        f"config.patch({FAST_INDUCTOR!r}).__enter__()\n"
        "model = torch.nn.Sequential(torch.nn.ZeroPad2d((0, 1, 0, 1)), torch.nn.Conv2d(3, 4, 3, stride=2))\n"
        "x = torch.randn(1, 3, 9, 8)\n"
        "torch.testing.assert_close(torch.compile(model, backend='fastpad')(x), model(x))\n"
        "assert 'fastpad' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


def make_training_model():
    """Every kind of rewrite in one small model (float32, for inductor)."""
    return nn.Sequential(
        nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, 8, 3, stride=2), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, groups=8, padding=1, padding_mode="reflect"),
        nn.Conv2d(8, 8, 4, padding="same"),
        CroppedTransposed2d(nn.ConvTranspose2d(8, 3, 3, stride=2, bias=False)),
    )


class CroppedTransposed2d(CroppedTransposed):
    def forward(self, x):
        return self.conv(x)[:, :, :-1, :-1]


class PostGradPadCounter:
    """Inductor's post-grad custom pass: counts the pad ops in each graph it compiles (forward, then backward)."""

    def __init__(self):
        self.counts = []

    def __call__(self, graph):
        self.counts.append(count_pad_ops(graph))


def test_inductor_training_step_fused_and_dynamic():
    """The whole backend (inductor) on a training step: no pad op in the forward or backward graphs inductor compiles,
    one compile for three sizes, the loss and gradients of eager."""
    torch._dynamo.reset()
    model = make_training_model()
    counter, pads = CompletedCompiles(backend=fastpad.compile_backend), PostGradPadCounter()

    def step(x):
        return torch.autograd.grad(model(x).square().mean(), list(model.parameters()))

    compiled = torch.compile(step, backend=counter, dynamic=True)
    with torch._inductor.config.patch({**FAST_INDUCTOR, **NO_GRAPH_CACHES, "post_grad_custom_post_pass": pads}):
        for size in SIZES:
            x = torch.randn(2, 3, *size[:2])
            # atol: the conv bias before the batch norm has a gradient of zero up to rounding
            torch.testing.assert_close(compiled(x), step(x), rtol=1e-4, atol=1e-6)
    assert counter.completed == 1 and pads.counts == [0, 0]


def test_backend_options():
    model = nn.Sequential(nn.ZeroPad2d((1, 0, 0, 1)), nn.Conv2d(3, 4, 3))
    x = torch.randn(1, 3, 7, 6)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="fastpad", options=FAST_INDUCTOR)
    torch.testing.assert_close(compiled(x), model(x))
    with pytest.raises(TypeError, match="options must be a dict"):
        fastpad.compile_backend(torch.fx.symbolic_trace(model), [x], options=["cpp.vec_isa_ok"])
    with pytest.raises(TypeError, match="mode must be a str"):
        fastpad.compile_backend(torch.fx.symbolic_trace(model), [x], mode=1)


def test_verbose_prints_the_fusions(capsys):
    model = Functional(lambda x, w: CONV[2](F.pad(x, (1, 0, 0, 1)), w), (4, 3, 3, 3))
    graph = torch.fx.symbolic_trace(model)
    fastpad.compile_backend(graph, [torch.randn(1, 3, 7, 6)], options=FAST_INDUCTOR, verbose=True)
    printed = capsys.readouterr().out
    assert "1 fused" in printed and "0 pad ops left" in printed


def test_convert_example_inputs_errors():
    model = nn.Conv2d(3, 4, 3)
    with pytest.raises(TypeError, match="example_inputs must be a tensor or a tuple"):
        fastpad.convert(model, example_inputs=[torch.randn(1, 3, 8, 8)])
    with pytest.raises(ValueError, match="example_inputs .* or trace=True"):
        fastpad.convert(model, example_inputs=torch.randn(1, 3, 8, 8), trace=True)

    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(RuntimeError, match="torch.export could not capture DataDependent.forward"):
        fastpad.convert(DataDependent(), example_inputs=torch.randn(1, 3, 8, 8))


def test_convert_example_inputs_report():
    model = nn.Sequential(nn.Conv2d(3, 4, 4, padding="same"), nn.ReLU())
    converted, report = fastpad.convert(model, example_inputs=(torch.randn(2, 3, 10, 11),), return_report=True)
    assert isinstance(converted, torch.fx.GraphModule)
    assert report.path == "modules, then the torch.export graph (dynamic: input 0 dims [0, 1, 2, 3])"
    assert "1 replaced" in str(report) and "pad ops left in the graph: 0" in str(report)
    assert [r.path for r in report.replaced] == ["0"]  # the module-level step replaced it before the export
