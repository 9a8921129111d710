"""The graph rewrite behind `torch.compile(backend="fastpad")` (fastpad/backend.py) and `fastpad.convert` with
`example_inputs` or on an FX graph (fastpad/_convert.py): one implementation of the pattern matching, for every
graph those produce.

It reads the three spellings of the same program:
  - Dynamo's graph (torch.compile): `F.pad`, `torch.conv2d`, `torch.conv_transpose2d`, `x[:, :, a:b]`, with example
    values (FakeTensors, SymInts) in `node.meta["example_value"]`;
  - torch.export's training IR: `aten.pad`, `aten.conv2d`, `aten.conv_transpose2d`, `aten.slice`, values in
    `node.meta["val"]`;
  - a symbolically traced graph: `F.pad`, and torch.nn convs as `call_module` nodes (no values).
Pads computed from the input's symbolic sizes stay graph nodes, so one rewritten graph serves every size.

Rewritten into one fastpad op (the conv's own padding is added to a zero pad in front of it):
  pad (constant 0, reflect, replicate, circular) -> conv        fastpad.conv with those pads, in that mode; a zero
                                                                 pad equal on both sides becomes the conv's own
                                                                 padding, torch's faster kernel (except depthwise
                                                                 NCHW on CPU: _fastpad_depthwise_wins)
  conv with padding="same" and an even effective kernel         fastpad.conv with torch's (lo, hi) split
  torch.nn conv (call_module) with a padding_mode                fastpad.conv in that mode
  conv_transpose -> crop of the spatial dims [-> zero pad at their high ends]
                                                                 fastpad.conv_transpose with that output window
Everything else stays as it was. Where a pattern is recognised but cannot be fused (a non-zero pad value, a pad of
the batch or channel dims, a padded tensor that other nodes read too, a pad that may be negative, two padding modes
in a row) it is listed in `GraphFusions.skipped` with the reason.
"""
from __future__ import annotations

import operator
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.utils._sympy.functions import FloorDiv
from torch.utils._sympy.value_ranges import bound_sympy

from . import _ops  # noqa: F401  (registers the fastpad ops)
from ._geometry import effective_kernel

aten = torch.ops.aten

Size = Union[int, fx.Node]  # a pad, crop or size: an int, or a node computing a SymInt
Pair = Tuple[Size, Size]

PAD_FUNCTIONS = (F.pad, torch._C._nn.pad, aten.pad.default)  # F.pad is a Python wrapper of the second
PAD_MODES = {"constant": "zeros", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}
CONV_FUNCTIONS = {
    torch.conv1d: 1, torch.conv2d: 2, torch.conv3d: 3,
    aten.conv1d.default: 1, aten.conv2d.default: 2, aten.conv3d.default: 3,
    aten.conv1d.padding: 1, aten.conv2d.padding: 2, aten.conv3d.padding: 3,
}
TRANSPOSED_FUNCTIONS = {
    torch.conv_transpose1d: 1, torch.conv_transpose2d: 2, torch.conv_transpose3d: 3,
    aten.conv_transpose1d.default: 1, aten.conv_transpose2d.input: 2, aten.conv_transpose3d.input: 3,
}
TORCH_CONV_MODULES = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}
TORCH_TRANSPOSED_MODULES = {nn.ConvTranspose1d: 1, nn.ConvTranspose2d: 2, nn.ConvTranspose3d: 3}
# The ops the rewrite removes from a graph, at every level down to inductor's post-grad graphs: what the tests and the
# benchmark count as pad kernels.
PAD_OPS = ("constant_pad_nd", "reflection_pad", "replication_pad", "_pad_circular", "aten.pad.")


@dataclass(frozen=True)
class Replacement:
    """One change: where (a module path, or an FX node), what was there, what replaced it."""
    path: str
    original: str
    fused: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.original} -> {self.fused}"


@dataclass
class GraphFusions:
    """What `fuse_padded_convolutions` replaced, and what it recognised but left alone (node, reason)."""
    replaced: List[Replacement] = field(default_factory=list)
    skipped: List[Tuple[str, str]] = field(default_factory=list)


# -- modules ------------------------------------------------------------------------------------------------------

def plain_torch_module_dims(module: nn.Module, bases: Dict[type, int]) -> Optional[int]:
    """The spatial dims of a torch.nn conv of one of `bases`, or of a subclass that computes exactly what it does (no
    forward of its own); None for anything else."""
    for base, dims in bases.items():
        if isinstance(module, base):
            cls = type(module)
            same_forward = cls.forward is base.forward and cls._conv_forward is base._conv_forward
            return dims if same_forward else None
    return None


def has_hooks(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or getattr(module, "_backward_pre_hooks", None))


def _called_module(graph_module: fx.GraphModule, node: fx.Node, bases: Dict[type, int]) -> Optional[nn.Module]:
    """The plain torch conv a `call_module` node calls, where the graph holds its only call and it has no hooks."""
    if node.op != "call_module":
        return None
    module = graph_module.get_submodule(node.target)
    calls = sum(other.op == "call_module" and other.target == node.target for other in node.graph.nodes)
    if plain_torch_module_dims(module, bases) is None or has_hooks(module) or calls != 1:
        return None
    return module


# -- reading nodes ------------------------------------------------------------------------------------------------

def node_arg(node: fx.Node, index: int, name: str, default):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _value(size: Any) -> Any:
    """The example value of a node (a FakeTensor or SymInt, None in a graph without them), or the argument itself."""
    if isinstance(size, fx.Node):
        return size.meta.get("val", size.meta.get("example_value"))
    return size


def _per_dim(value, dims: int, allow_nodes: bool) -> Optional[Tuple]:
    """An int (or node) broadcast, or a sequence of 1 or `dims` of them; None for anything else."""
    kinds = (int, fx.Node) if allow_nodes else (int,)
    if isinstance(value, kinds) and not isinstance(value, bool):
        return (value,) * dims
    if isinstance(value, (tuple, list)) and len(value) in (1, dims) and all(
            isinstance(v, kinds) and not isinstance(v, bool) for v in value):
        return tuple(value) * (dims // len(value))
    return None


def _static_shape(graph_module: fx.GraphModule, node) -> Optional[Tuple[int, ...]]:
    if isinstance(node, fx.Node) and node.op == "get_attr":
        value = operator.attrgetter(node.target)(graph_module)
    else:
        value = _value(node)
    if not isinstance(value, torch.Tensor) or not all(isinstance(s, int) for s in value.shape):
        return None
    return tuple(value.shape)


def _known_nonnegative(size: Size) -> bool:
    """Whether a pad is >= 0 for every input size the graph accepts."""
    value = _value(size)
    if isinstance(value, int):
        return value >= 0
    if not isinstance(value, torch.SymInt):
        return False
    if statically_known_true(value >= 0):
        return True
    # The high side of a split 'same' pad, t - t // c with t >= 0, is >= 0; range analysis bounds its two terms
    # separately (t - t // c >= 0 - inf) and cannot see it.
    expr, shape_env = value.node.expr, value.node.shape_env
    terms = expr.args if expr.is_Add else ()
    for total, negated in (terms, terms[::-1]) if len(terms) == 2 else ():
        floor_div = -negated
        if (isinstance(floor_div, FloorDiv) and floor_div.args[0] == total and floor_div.args[1].is_positive
                and bound_sympy(total, shape_env.var_to_range).lower >= 0):
            return True
    return False


def _is_groups(groups: Any) -> bool:
    """An int, or a node computing it from the input's channels: Keras divides them by the kernel's, and where
    torch.export leaves the channel dim dynamic that division is a graph node, which the fused op takes as it is."""
    return (isinstance(groups, int) and not isinstance(groups, bool)) or isinstance(_value(groups), torch.SymInt)


def _describe(size: Size) -> str:
    value = _value(size)
    return str(value if value is not None else size)


def _describe_pairs(pairs: Sequence[Pair]) -> str:
    return "(" + ", ".join(f"({_describe(lo)}, {_describe(hi)})" for lo, hi in pairs) + ")"


@dataclass
class _ConvNode:
    """A convolution or transposed convolution node, normalised over its spellings. `weight` and `bias` are nodes,
    or for a call_module conv the attribute paths to read them from."""
    node: fx.Node
    name: str
    input: Any
    weight: Any
    bias: Any
    stride: Tuple[int, ...]


@dataclass
class _Conv(_ConvNode):
    pairs: Tuple[Pair, ...]
    dilation: Tuple[int, ...]
    groups: Size
    mode: str
    in_channels_per_group: int


def torch_padding_pairs(padding, kernel: Sequence[int], dilation: Sequence[int]) -> Optional[Tuple[Pair, ...]]:
    """The (lo, hi) pads torch applies for a conv's `padding` argument; torch's 'same' (stride 1) puts the odd one
    last. None for a value that is none of torch's."""
    dims = len(kernel)
    if padding == "valid":
        return ((0, 0),) * dims
    if padding == "same":
        totals = [effective_kernel(k, d) - 1 for k, d in zip(kernel, dilation)]
        return tuple((total // 2, total - total // 2) for total in totals)
    symmetric = _per_dim(padding, dims, allow_nodes=True)
    return None if symmetric is None else tuple((p, p) for p in symmetric)


def _parse_conv(graph_module: fx.GraphModule, node: fx.Node) -> Optional[_Conv]:
    if node.op == "call_function" and node.target in CONV_FUNCTIONS:
        dims = CONV_FUNCTIONS[node.target]
        weight = node_arg(node, 1, "weight", None)
        shape = _static_shape(graph_module, weight)
        stride = _per_dim(node_arg(node, 3, "stride", 1), dims, allow_nodes=False)
        dilation = _per_dim(node_arg(node, 5, "dilation", 1), dims, allow_nodes=False)
        groups = node_arg(node, 6, "groups", 1)
        if shape is None or stride is None or dilation is None or not _is_groups(groups):
            return None
        pairs = torch_padding_pairs(node_arg(node, 4, "padding", 0), shape[2:], dilation)
        if pairs is None:
            return None
        return _Conv(node, getattr(node.target, "__name__", str(node.target)), node_arg(node, 0, "input", None),
                     weight, node_arg(node, 2, "bias", None), stride, pairs, dilation, groups, "zeros", shape[1])
    module = _called_module(graph_module, node, TORCH_CONV_MODULES)
    if module is None:
        return None
    return _Conv(node, f"{type(module).__name__}({module.extra_repr()})", node_arg(node, 0, "input", None),
                 f"{node.target}.weight", None if module.bias is None else f"{node.target}.bias", module.stride,
                 torch_padding_pairs(module.padding, module.kernel_size, module.dilation), module.dilation,
                 module.groups, module.padding_mode, module.in_channels // module.groups)


@dataclass
class _Pad:
    node: fx.Node
    source: fx.Node
    pairs: Tuple[Pair, ...]
    mode: str


def _parse_pad(node: Any, dims: int) -> Tuple[Optional[_Pad], Optional[str]]:
    """(the pad, None) for a fusable pad of the `dims` spatial dims of a tensor; (None, reason) for a pad that is not;
    (None, None) for anything that is no pad at all."""
    if not isinstance(node, fx.Node) or node.op != "call_function" or node.target not in PAD_FUNCTIONS:
        return None, None
    amounts, mode = node_arg(node, 1, "pad", None), node_arg(node, 2, "mode", "constant")
    value = node_arg(node, 3, "value", None)
    if mode not in PAD_MODES:
        return None, f"pad mode {mode!r}"
    if mode == "constant" and not (value is None or (isinstance(value, (int, float)) and value == 0)):
        return None, f"pad value {value!r} is not 0"
    if not isinstance(amounts, (tuple, list)) or len(amounts) % 2:
        return None, f"pad amounts {amounts!r}"
    spatial, outer = amounts[:2 * dims], amounts[2 * dims:]
    if any(not (isinstance(a, int) and a == 0) for a in outer):
        return None, f"pads the batch or channel dim: {[_describe(a) for a in amounts]}"
    if not all(isinstance(a, (int, fx.Node)) and _known_nonnegative(a) for a in spatial):
        return None, f"a pad amount may be negative (a crop): {[_describe(a) for a in amounts]}"
    # F.pad lists (lo, hi) from the last dim backwards and may leave out the leading spatial dims.
    listed = len(spatial) // 2
    pairs = ((0, 0),) * (dims - listed) + tuple((spatial[2 * i], spatial[2 * i + 1]) for i in reversed(range(listed)))
    return _Pad(node, node_arg(node, 0, "input", None), pairs, PAD_MODES[mode]), None


@dataclass
class _Transposed(_ConvNode):
    padding: Tuple[int, ...]
    output_padding: Tuple[int, ...]
    groups: Size
    dilation: Tuple[int, ...]
    kernel: Tuple[int, ...]


def _parse_transposed(graph_module: fx.GraphModule, node: fx.Node) -> Optional[_Transposed]:
    if node.op == "call_function" and node.target in TRANSPOSED_FUNCTIONS:
        dims = TRANSPOSED_FUNCTIONS[node.target]
        weight = node_arg(node, 1, "weight", None)
        shape = _static_shape(graph_module, weight)
        ints = [_per_dim(node_arg(node, index, name, default), dims, allow_nodes=False)
                for index, name, default in ((3, "stride", 1), (4, "padding", 0), (5, "output_padding", 0),
                                             (7, "dilation", 1))]
        groups = node_arg(node, 6, "groups", 1)
        if shape is None or any(v is None for v in ints) or not _is_groups(groups):
            return None
        stride, padding, output_padding, dilation = ints
        return _Transposed(node, getattr(node.target, "__name__", str(node.target)), node_arg(node, 0, "input", None),
                           weight, node_arg(node, 2, "bias", None), stride, padding, output_padding, groups, dilation,
                           shape[2:])
    module = _called_module(graph_module, node, TORCH_TRANSPOSED_MODULES)
    if module is None or node_arg(node, 1, "output_size", None) is not None or not isinstance(module.padding, tuple):
        return None
    return _Transposed(node, f"{type(module).__name__}({module.extra_repr()})", node_arg(node, 0, "input", None),
                       f"{node.target}.weight", None if module.bias is None else f"{node.target}.bias",
                       module.stride, module.padding, module.output_padding, module.groups, module.dilation,
                       module.kernel_size)


def _only_user(node: fx.Node) -> Optional[fx.Node]:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _parse_crop(node: Optional[fx.Node], dims: int) -> Optional[Tuple[List[fx.Node], List[Tuple[Any, Any]]]]:
    """(the crop's nodes in order, one (start, end) slice per spatial dim) for `x[:, :, a:b, ...]` or a chain of
    aten.slice on the spatial dims; None for anything else."""
    windows: List[Tuple[Any, Any]] = [(None, None)] * dims
    if node is None or node.op != "call_function":
        return None
    if node.target is operator.getitem:
        index = node.args[1]
        if not isinstance(index, tuple) or not 2 < len(index) <= dims + 2 or not all(
                isinstance(s, slice) and s.step in (None, 1) for s in index):
            return None
        if any(s != slice(None) for s in index[:2]):
            return None  # crops the batch or channel dim
        for dim, s in enumerate(index[2:]):
            windows[dim] = (s.start, s.stop)
        return [node], windows
    chain = []
    while node is not None and node.op == "call_function" and node.target is aten.slice.Tensor:
        dim, start = node_arg(node, 1, "dim", 0), node_arg(node, 2, "start", None)
        end, step = node_arg(node, 3, "end", None), node_arg(node, 4, "step", 1)
        end = None if end == sys.maxsize else end
        spatial = dim - 2 if isinstance(dim, int) and dim >= 0 else (dim + dims if isinstance(dim, int) else -1)
        if step != 1:
            break
        if 0 <= spatial < dims and windows[spatial] == (None, None):
            windows[spatial] = (start, end)
        elif start not in (None, 0) or end is not None:  # torch.export slices the batch dim whole where dynamic
            break
        chain.append(node)
        node = _only_user(node)
    cropped = any(window != (None, None) for window in windows)  # not only whole slices of the batch dim
    return (chain, windows) if cropped else None


# -- writing nodes ------------------------------------------------------------------------------------------------

class _Writer:
    """Inserts nodes before `anchor`, each with the example value the graph's nodes carry (if they do): later matches
    read the shapes of the nodes written here."""

    def __init__(self, graph: fx.Graph, anchor: fx.Node):
        self.graph, self.anchor = graph, anchor
        self.meta_key = next((key for key in ("val", "example_value") if key in anchor.meta), None)

    def call(self, target, args: tuple) -> fx.Node:
        with self.graph.inserting_before(self.anchor):
            node = self.graph.call_function(target, args)
        if self.meta_key is not None and all(_value(arg) is not None for arg in node.all_input_nodes):
            node.meta[self.meta_key] = target(*fx.node.map_arg(args, _value))
        return node

    def operand(self, value):
        """A node for a conv's weight or bias: itself, or a get_attr for a module's attribute path."""
        if not isinstance(value, str):
            return value
        with self.graph.inserting_before(self.anchor):
            return self.graph.get_attr(value)

    def add(self, a: Size, b: Size) -> Size:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if _is_zero(a) or _is_zero(b):
            return b if _is_zero(a) else a
        return self.call(operator.add, (a, b))

    def affine(self, size: Size, scale: int, offset: int) -> Size:
        """size * scale + offset."""
        if isinstance(size, int):
            return size * scale + offset
        return self.add(size if scale == 1 else self.call(operator.mul, (size, scale)), offset)

    def spatial_size(self, tensor: fx.Node, dim: int) -> Size:
        size = _value(tensor).shape[dim]
        return size if isinstance(size, int) else self.call(aten.sym_size.int, (tensor, dim))


def _is_zero(size: Size) -> bool:
    return isinstance(size, int) and size == 0


# -- the rewrite --------------------------------------------------------------------------------------------------

def _conv_padding(conv: _Conv, pad: Optional[_Pad]):
    """(pad pairs, conv pairs, mode), whose sum is the one fused padding of `pad` (if any) then the conv's own, or
    the reason there is none; None where there is nothing to fuse."""
    dims = len(conv.stride)
    none = ((0, 0),) * dims
    conv_unpadded = all(_is_zero(size) for pair in conv.pairs for size in pair)
    if pad is None:
        if conv_unpadded or (conv.mode == "zeros" and all(lo is hi or lo == hi for lo, hi in conv.pairs)):
            return None  # torch pads symmetrically in zeros mode without a copy
        return none, conv.pairs, conv.mode
    if conv_unpadded:
        return pad.pairs, none, pad.mode
    if pad.mode == "zeros" and conv.mode == "zeros":
        return pad.pairs, conv.pairs, "zeros"
    return f"a {pad.mode} pad, then the conv's own {conv.mode} padding: not one padding"


def _known_equal(a: Size, b: Size) -> bool:
    """Whether two pads are equal for every input size the graph accepts."""
    if a is b:
        return True
    a_value, b_value = _value(a), _value(b)
    if isinstance(a_value, int) and isinstance(b_value, int):
        return a_value == b_value
    if isinstance(a_value, (int, torch.SymInt)) and isinstance(b_value, (int, torch.SymInt)):
        return statically_known_true(a_value == b_value)
    return False


def _fastpad_depthwise_wins(source: Any, conv: _Conv, inductor_layout: bool) -> bool:
    """Whether fastpad's kernel should take a symmetric zero pad instead of torch's convolution: only for depthwise
    convolutions of a contiguous (NCHW) input on CPU, outside inductor. Measured on MobileNetV2's 3x3 layers at batch 8
    (benchmarks/symmetric_pad_kernels.py, RESULTS.md): in NCHW fastpad takes 0.30-0.41x torch's time on the large
    planes (112x112, 56x56), where most of the time goes, and 1.2-2.7x on the small ones (28x28 and below); in
    channels_last oneDNN is faster on every one (fastpad 1.3-3.2x), and inductor runs CPU convolutions channels_last."""
    value = _value(source)
    if inductor_layout or not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.dim() < 3:
        return False
    return conv.in_channels_per_group == 1 and value.is_contiguous()  # fastpad's CPU depthwise path


def _fuse_conv(graph_module: fx.GraphModule, conv: _Conv, fusions: GraphFusions, inductor_layout: bool) -> None:
    pad, reason = None, None
    if isinstance(conv.input, fx.Node) and _only_user(conv.input) is conv.node:
        pad, reason = _parse_pad(conv.input, len(conv.stride))
    padding = reason if reason is not None else _conv_padding(conv, pad)
    if isinstance(padding, str):
        fusions.skipped.append((conv.node.name, f"pad -> {conv.name}: {padding}"))
        return
    if padding is None:
        return
    pad_pairs, conv_pairs, mode = padding
    writer = _Writer(graph_module.graph, conv.node)
    pairs = [(writer.add(a, c), writer.add(b, d)) for (a, b), (c, d) in zip(pad_pairs, conv_pairs)]
    source = pad.source if pad is not None else conv.input
    weight, bias = writer.operand(conv.weight), writer.operand(conv.bias)
    if mode == "zeros" and all(_known_equal(lo, hi) for lo, hi in pairs) and not _fastpad_depthwise_wins(
            source, conv, inductor_layout):
        # A zero pad that is the same on both sides of every dim is torch's own padding: its convolution takes it
        # without a copy, and its kernels are the fastest there (see _fastpad_depthwise_wins).
        fused = writer.call(aten.convolution.default, (
            source, weight, bias, list(conv.stride), [lo for lo, _ in pairs], list(conv.dilation), False,
            [0] * len(pairs), conv.groups))
        described = f"torch convolution(padding={[_describe(lo) for lo, _ in pairs]})"
    else:
        fused = writer.call(torch.ops.fastpad.conv.default, (
            source, weight, bias, list(conv.stride), [lo for lo, _ in pairs], [hi for _, hi in pairs],
            list(conv.dilation), conv.groups, mode))
        described = f"fastpad.conv(pads={_describe_pairs(pairs)}, padding_mode={mode!r})"
    conv.node.replace_all_uses_with(fused)
    graph_module.graph.erase_node(conv.node)
    if pad is not None:
        graph_module.graph.erase_node(pad.node)
    path = conv.node.target if conv.node.op == "call_module" else conv.node.name
    original = conv.name if pad is None else f"pad(mode={pad.mode!r}) + {conv.name}"
    fusions.replaced.append(Replacement(path, original, described))


def _high_extension(conv: _Transposed, crop_end: fx.Node, windows) -> Tuple[Optional[fx.Node], Tuple[int, ...]]:
    """A zero pad right after the crop that extends spatial dims at their high ends only, past the end of the full
    output of a conv without bias, where fastpad's output positions are zeros too (Keras pads so where a crop is
    negative): (the pad node, the extension per dim); (None, zeros) where there is none."""
    dims = len(windows)
    pad, _ = _parse_pad(_only_user(crop_end), dims)
    if pad is None or pad.mode != "zeros" or conv.bias is not None:
        return None, (0,) * dims
    for (lo, hi), (_, end), padding, extra in zip(pad.pairs, windows, conv.padding, conv.output_padding):
        if not (_is_zero(lo) and isinstance(hi, int) and (hi == 0 or (end is None and extra >= padding))):
            return None, (0,) * dims
    return pad.node, tuple(hi for _, hi in pad.pairs)


def _fuse_transposed(graph_module: fx.GraphModule, conv: _Transposed, fusions: GraphFusions) -> None:
    crop = _parse_crop(_only_user(conv.node), len(conv.stride))
    if crop is None:
        return
    crop_nodes, windows = crop
    in_value, out_value = _value(conv.input), _value(conv.node)
    if not isinstance(in_value, torch.Tensor) or not isinstance(out_value, torch.Tensor):
        fusions.skipped.append((conv.node.name, f"{conv.name} -> crop: the graph has no shapes to check it with"))
        return
    pad_node, extension = _high_extension(conv, crop_nodes[-1], windows)
    plans = []  # per dim: (crop_lo, the output size if fixed, else its offset from input size * stride)
    for dim, (start, end) in enumerate(windows):
        start = 0 if start is None else start
        torch_size = out_value.shape[2 + dim]
        # torch's output size, (i - 1)*s + k_eff - 2*padding + output_padding, is smallest at input size i = 1
        smallest = (effective_kernel(conv.kernel[dim], conv.dilation[dim]) - 2 * conv.padding[dim]
                    + conv.output_padding[dim])
        valid = isinstance(start, int) and start >= 0 and (end is None or isinstance(end, int))
        if valid and (end is None or end < 0):  # the window's end moves with the output size
            length = smallest + (end or 0) - start  # at i = 1: where the window is smallest
            plans.append((conv.padding[dim] + start, None, length - conv.stride[dim] + extension[dim]))
        elif valid:
            length = end - start
            valid = end <= smallest or statically_known_true(end <= torch_size)
            plans.append((conv.padding[dim] + start, length, None))
        if not valid or length < 1:
            fusions.skipped.append((conv.node.name, f"{conv.name} -> crop: slice {start}:{end} of spatial dim {dim} "
                                                    f"is not a window of the output"))
            return
    writer = _Writer(graph_module.graph, conv.node)
    crop_lo = [lo for lo, _, _ in plans]
    out_size = [fixed if fixed is not None else writer.affine(writer.spatial_size(conv.input, 2 + dim),
                                                              conv.stride[dim], offset)
                for dim, (_, fixed, offset) in enumerate(plans)]
    fused = writer.call(torch.ops.fastpad.conv_transpose.default, (
        conv.input, writer.operand(conv.weight), writer.operand(conv.bias), list(conv.stride), crop_lo, out_size,
        list(conv.dilation), conv.groups, "zeros"))
    removed = [conv.node, *crop_nodes] + ([pad_node] if pad_node is not None else [])
    removed[-1].replace_all_uses_with(fused)
    for node in reversed(removed):
        graph_module.graph.erase_node(node)
    path = conv.node.target if conv.node.op == "call_module" else conv.node.name
    original = f"{conv.name} + crop" + (" + zero pad" if pad_node is not None else "")
    fusions.replaced.append(Replacement(path, original, f"fastpad.conv_transpose(crop_lo={crop_lo}, out_size="
                                                        f"[{', '.join(_describe(s) for s in out_size)}])"))


def fuse_padded_convolutions(graph_module: fx.GraphModule, inductor_layout: bool = False) -> GraphFusions:
    """Rewrites `graph_module` in place: every pattern of the module docstring becomes one fastpad op (or torch's
    convolution, for a symmetric zero pad). Returns what was replaced and what was recognised but left alone.

    inductor_layout: the graph goes to inductor, which runs CPU convolutions channels_last."""
    fusions = GraphFusions()
    erased = set()
    for node in list(graph_module.graph.nodes):
        if node in erased:
            continue
        before = set(graph_module.graph.nodes)
        conv = _parse_conv(graph_module, node)
        if conv is not None:
            _fuse_conv(graph_module, conv, fusions, inductor_layout)
        else:
            transposed = _parse_transposed(graph_module, node)
            if transposed is not None:
                _fuse_transposed(graph_module, transposed, fusions)
        erased |= before - set(graph_module.graph.nodes)
    if fusions.replaced:
        graph_module.graph.lint()
        graph_module.recompile()
    return fusions


def count_pad_ops(graph: fx.Graph) -> int:
    """The pad calls in a graph: `F.pad`, and the ATen pad ops of `PAD_OPS` (forward and backward)."""
    return sum(node.op == "call_function" and (node.target in PAD_FUNCTIONS
                                               or any(name in str(node.target) for name in PAD_OPS))
               for node in graph.nodes)
