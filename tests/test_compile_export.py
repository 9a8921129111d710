"""A compiled training loop and torch.export of fastpad models.

- A whole training step (forward, loss, backward, SGD update) under torch.compile(fullgraph=True, dynamic=True)
  compiles once for every input size: the 'same' pads are SymInt expressions of the input size
  (fastpad/_geometry.py), so no guard on a size or its parity is installed. The default automatic dynamic
  (dynamic=None) compiles at most twice: static first, then one dynamic graph for all later sizes.
- torch.export.export with dynamic spatial dims, and a static export; the exported programs run and match eager.

Compiles are counted exactly: the graphs the backend finished compiling, and the entries Dynamo cached for the
step's code object (one per distinct set of guards).
"""

import copy
import io

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.testing import CompileCounterWithBackend
from torch._dynamo.utils import counters
from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

import fastpad
from reference import relative_error

# (height, width) per step: odd, even, prime and mixed. The first is not square and no dim equals the batch (2)
# or the channel count (3): Dynamo's duck sizing would give equal sizes one symbol and recompile when they part.
SIZES = [(11, 14), (16, 16), (13, 9), (20, 17), (7, 12)]
BATCH = 2
LR = 0.1

# The tests are about graph capture and recompiles, not about the speed of inductor's C++: -O0 and no
# vectorisation make a cold compile several times faster on a small CI machine.
FAST_INDUCTOR = {"aot_inductor.debug_compile": True, "cpp.vec_isa_ok": False}
# Without inductor's and AOTAutograd's graph caches, so that the counts do not depend on what earlier runs left in
# them (the compiled kernels are still cached): a graph taken from those caches brings its guards along, which
# test_warm_graph_cache_strided_reflect_compiles_once covers on its own.
NO_GRAPH_CACHES = {"fx_graph_cache": False}

# torch.export's own pytree use (save/load, run_decompositions) warns about itself.
pytestmark = pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated:FutureWarning")


def make_model(reflect_stride=2):
    """Tiny, but every kind of padding whose handling could guard on a size."""
    return torch.nn.Sequential(
        fastpad.nn.Conv2d(3, 8, 3, stride=2),                            # strided 'same': pads depend on the size
        torch.nn.GroupNorm(2, 8),
        torch.nn.SiLU(),
        fastpad.nn.Conv2d(8, 8, 3, stride=reflect_stride, groups=8, padding_mode="reflect"),  # depthwise, reflect
        fastpad.nn.Conv2d(8, 8, (2, 3), padding=((1, 0), (0, 2))),       # asymmetric (lo, hi) pads
        fastpad.nn.Conv2d(8, 8, 3, padding="causal", dilation=(1, 2)),    # causal
        fastpad.nn.ConvTranspose2d(8, 3, 3, stride=2),                     # transposed 'same': out = in * 2
    )


def loss_fn(y):
    return y.square().mean()


def make_train_step(model):
    """forward, loss, backward and a plain SGD update, all traceable in one graph.

    torch.optim's step() graph-breaks on purpose (torch/optim/optimizer.py, _use_grad), so the update is the
    foreach op SGD uses; the eager copy runs torch.optim.SGD itself."""
    params = list(model.parameters())

    def train_step(x):
        loss = loss_fn(model(x))
        loss.backward()
        grads = [p.grad for p in params]
        with torch.no_grad():
            torch._foreach_add_(params, grads, alpha=-LR)
        for p in params:
            p.grad = None
        return loss.detach(), [g.detach() for g in grads]

    return train_step


def eager_train_step(model, optimizer, x):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x))
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    optimizer.step()
    return loss.detach(), grads


class CompletedCompiles(CompileCounterWithBackend):
    """Counts the graphs the backend finished compiling. frame_count also counts an attempt that Dynamo abandons
    and restarts (here after its _tensorify_python_scalars pass, for GroupNorm's eps), which is no recompile."""

    def __init__(self, backend="inductor"):
        super().__init__(backend)
        self.completed = 0

    def __call__(self, gm, example_inputs):
        compiled = super().__call__(gm, example_inputs)
        self.completed += 1
        return compiled


def assert_close(got, expected, what, tol=1e-5):
    error = relative_error(got, expected)
    assert error <= tol, f"{what}: relative error {error:.3g} > {tol:g}"


def train_compiled_and_eager(dynamic, sizes):
    """Trains a compiled model and an eager copy in lockstep, one step per size, comparing the loss, the gradients
    and the parameters after every step. Returns (completed compiles, Dynamo cache entries)."""
    torch._dynamo.reset()
    model = make_model()
    eager_model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(eager_model.parameters(), lr=LR)
    train_step = make_train_step(model)
    counter = CompletedCompiles()
    compiled_step = torch.compile(train_step, backend=counter, fullgraph=True, dynamic=dynamic)
    names = [name for name, _ in model.named_parameters()]
    with torch._dynamo.config.patch(trace_autograd_ops=True), \
            torch._inductor.config.patch({**FAST_INDUCTOR, **NO_GRAPH_CACHES}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        for size in sizes:
            x = torch.randn(BATCH, 3, *size)
            loss, grads = compiled_step(x)
            expected_loss, expected_grads = eager_train_step(eager_model, optimizer, x)
            assert_close(loss, expected_loss, f"loss at size {size}")
            for name, g, e in zip(names, grads, expected_grads):
                assert_close(g, e, f"grad of {name} at size {size}")
            for (name, p), e in zip(model.named_parameters(), eager_model.parameters()):
                assert_close(p, e, f"{name} after the step at size {size}")
    return counter.completed, len(_debug_get_cache_entry_list(train_step))


def test_train_step_dynamic_compiles_once():
    compiles, entries = train_compiled_and_eager(True, SIZES)
    assert compiles == 1 and entries == 1, (
        f"{compiles} compiles, {entries} cached entries for {len(SIZES)} sizes: a guard specialises a size "
        f"(TORCH_LOGS=recompiles shows which)")


def test_train_step_automatic_dynamic_compiles_at_most_twice():
    compiles, entries = train_compiled_and_eager(None, SIZES)
    assert compiles <= 2 and entries <= 2, (
        f"{compiles} compiles, {entries} cached entries for {len(SIZES)} sizes with automatic dynamic shapes")


def test_warm_graph_cache_strided_reflect_compiles_once(tmp_path):
    """The second run of a program, with its graphs in inductor's and AOTAutograd's caches, must not recompile
    where the first did not."""
    conv = fastpad.nn.Conv2d(3, 4, 3, stride=2, padding_mode="reflect")
    compiles = {}
    with temporary_cache_dir(str(tmp_path)), torch._inductor.config.patch({**FAST_INDUCTOR, "fx_graph_cache": True}), \
            torch._functorch.config.patch(enable_autograd_cache=True):
        for run in ("cold", "warm"):
            torch._dynamo.reset()
            counters.clear()
            counter = CompletedCompiles()
            compiled = torch.compile(conv, backend=counter, fullgraph=True, dynamic=True)
            for size in (9, 10, 11, 12):
                x = torch.randn(1, 3, size, 16)
                assert_close(compiled(x), conv(x), f"{run} run at size {size}")
            compiles[run] = counter.completed
        if not counters["aot_autograd"]["autograd_cache_hit"]:
            pytest.skip("the graph caches are disabled here (e.g. TORCHINDUCTOR_FORCE_DISABLE_CACHES)")
    assert compiles == {"cold": 1, "warm": 1}, f"compiles per run for sizes 9, 10, 11, 12: {compiles}"


# --------------------------------------------------------------------------------------------
# torch.export


def fastpad_ops(exported):
    return [str(node.target) for node in exported.graph.nodes
            if node.op == "call_function" and str(node.target).startswith("fastpad.")]


FASTPAD_OPS = ["fastpad.conv.default"] * 4 + ["fastpad.conv_transpose.default"]


def assert_runs_like_eager(module, model, sizes, batch=BATCH):
    for size in sizes:
        x = torch.randn(batch, 3, *size)
        with torch.no_grad():
            assert_close(module(x), model(x), f"exported program at size {size}")


def test_export_dynamic_spatial_dims():
    """One program for every size from 3 (the smallest the reflect layer accepts) up: a strided 'same' layer's
    output size simplifies to exactly ceil(i/s) (fastpad/_geometry.py, _same_pair), so torch.export proves every
    check over the Dims' whole range, and the program saves and loads in well under a second."""
    model = make_model(reflect_stride=1).eval()
    height, width = torch.export.Dim("height", min=3, max=512), torch.export.Dim("width", min=3, max=512)
    exported = torch.export.export(model, (torch.randn(BATCH, 3, 15, 18),), dynamic_shapes=({2: height, 3: width},))
    assert fastpad_ops(exported) == FASTPAD_OPS
    sizes = [(15, 18), (3, 4), (11, 14), (16, 16), (13, 9), (20, 17), (64, 31), (5, 512)]
    assert_runs_like_eager(exported.module(), model, sizes)
    with pytest.raises(Exception, match=">= 3"):  # below the Dims' range: the program's guard refuses it
        exported.module()(torch.randn(BATCH, 3, 2, 16))
    buffer = io.BytesIO()
    torch.export.save(exported, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    assert fastpad_ops(loaded) == FASTPAD_OPS
    assert_runs_like_eager(loaded.module(), model, [(21, 10)])


@pytest.mark.parametrize("mode", ["reflect", "circular"])
def test_export_dynamic_strided_reflect_or_circular(mode):
    model = torch.nn.Sequential(fastpad.nn.Conv2d(3, 4, 3, stride=2),
                                fastpad.nn.Conv2d(4, 4, 3, stride=2, padding_mode=mode)).eval()
    height = torch.export.Dim("height", min=5, max=1024)
    exported = torch.export.export(model, (torch.randn(1, 3, 64, 64),), dynamic_shapes=({2: height},))
    assert_runs_like_eager(exported.module(), model, [(5, 64), (6, 64), (333, 64)], batch=1)


def test_export_static():
    model = make_model().eval()
    exported = torch.export.export(model, (torch.randn(BATCH, 3, 13, 10),))
    assert fastpad_ops(exported) == FASTPAD_OPS
    assert_runs_like_eager(exported.module(), model, [(13, 10)])
    decomposed = exported.run_decompositions()  # to core ATen: the fastpad ops stay whole
    assert fastpad_ops(decomposed) == FASTPAD_OPS
    assert_runs_like_eager(decomposed.module(), model, [(13, 10)])


@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "conv_transpose"])
def test_public_functions_on_meta_tensors_give_the_output_shape(transposed):
    """Meta tensors (shape inference, models built on the meta device) go through the fake kernels; the public
    functions must not ask autocast about a device it does not know. 'same' at stride 2: ceil(size / 2) for the
    conv, size * 2 for the transposed conv."""
    x = torch.empty(2, 4, 9, 10, device="meta")
    if transposed:
        y, expected = fastpad.conv_transpose2d(x, torch.empty(4, 6, 3, 3, device="meta"), stride=2), (2, 6, 18, 20)
    else:
        y = fastpad.conv2d(x, torch.empty(6, 4, 4, 3, device="meta"), stride=2, padding_mode="reflect")
        expected = (2, 6, 5, 5)
    assert y.device.type == "meta" and tuple(y.shape) == expected
