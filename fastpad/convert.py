"""`fastpad.convert(model)`: swaps the padded convolutions of an existing model for fused fastpad layers.

It recognises timm's same-padding convs, torch convs whose padding torch cannot fuse, `nn.Sequential` runs of a
padding module followed by a conv, and (in an FX graph) `F.pad` -> conv. Parameters are moved, never copied, so
state_dict keys and values stay the same.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import fx, nn

from . import _geometry, functional
from . import nn as fused_nn

PadPairs = Tuple[Tuple[int, int], ...]

_TORCH_CONVS = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
_FUSED_CONVS = {1: fused_nn.Conv1d, 2: fused_nn.Conv2d, 3: fused_nn.Conv3d}
_PAD_MODULES = {
    **{cls: "zeros" for cls in (nn.ZeroPad1d, nn.ZeroPad2d, nn.ZeroPad3d,
                                nn.ConstantPad1d, nn.ConstantPad2d, nn.ConstantPad3d)},
    **{cls: "reflect" for cls in (nn.ReflectionPad1d, nn.ReflectionPad2d, nn.ReflectionPad3d)},
    **{cls: "replicate" for cls in (nn.ReplicationPad1d, nn.ReplicationPad2d, nn.ReplicationPad3d)},
    **{cls: "circular" for cls in (nn.CircularPad1d, nn.CircularPad2d, nn.CircularPad3d)},
}
_F_PAD_MODES = {"constant": "zeros", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}
_FUNCTIONAL_CONVS = {F.conv1d: 1, F.conv2d: 2, F.conv3d: 3, torch.conv1d: 1, torch.conv2d: 2, torch.conv3d: 3}


@dataclass(frozen=True)
class Replacement:
    """One change made by `convert`: where (the module path, or the FX node), what was there, what replaced it."""
    path: str
    original: str
    fused: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.original} -> {self.fused}"


@dataclass
class ConversionReport:
    """What `convert` replaced, and what it recognised but left alone (with the reason)."""
    replaced: List[Replacement]
    skipped: List[Tuple[str, str]]

    def __str__(self) -> str:
        lines = [f"fastpad.convert: {len(self.replaced)} replaced, {len(self.skipped)} left as they were"]
        lines += [f"  replaced {r}" for r in self.replaced]
        lines += [f"  skipped  {path or '<root>'}: {reason}" for path, reason in self.skipped]
        return "\n".join(lines)


def convert(model: nn.Module, inplace: bool = False, *, trace: bool = False, verbose: bool = False,
            return_report: bool = False) -> Union[nn.Module, Tuple[nn.Module, ConversionReport]]:
    """Returns `model` with every padded convolution it recognises replaced by a fused fastpad layer.

    Recognised:
      - timm `Conv2dSame` and `Conv2dSameExport` -> `fastpad.nn.Conv2d(padding="same")`; timm `StdConv2dSame`,
        `ScaledStdConv2dSame` and `CondConv2d` with dynamic 'same' padding keep their weight computation and
        call the fused op;
      - `torch.nn.Conv{1,2,3}d` with `padding="same"` and an even effective kernel (an asymmetric split), or with a
        `padding_mode` other than "zeros";
      - in an `nn.Sequential`, a padding module (`ZeroPad*`, `ConstantPad*` with value 0, `ReflectionPad*`,
        `ReplicationPad*`, `CircularPad*`) followed by a torch conv: the pad becomes `nn.Identity()` and the conv
        a fused layer at the same index, so state_dict keys do not move;
      - if `model` is a `torch.fx.GraphModule` (or `trace=True`, which traces it with `torch.fx.symbolic_trace`
        first), `F.pad` with constant pads followed by a conv.
    Parameters are moved into the new layers (the same `nn.Parameter` objects), so weights, device, dtype and
    requires_grad are kept; so is train/eval mode. Modules with hooks are left alone and listed as skipped.

    inplace: change `model` itself instead of a deep copy. verbose: print the report.
    return_report: return `(model, ConversionReport)` instead of the model alone.

    >>> model = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(3, 8, 3, stride=2))
    >>> convert(model)
    Sequential(
      (0): Identity()
      (1): Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=((0, 1), (0, 1)))
    )
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"fastpad.convert: model must be a torch.nn.Module, got {type(model).__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    report = ConversionReport([], [])
    root = _fused_module(model, "", report)
    if root is not None:
        model = root
    else:
        _convert_children(model, "", report)
    if trace and not isinstance(model, fx.GraphModule):
        model = fx.symbolic_trace(model)
    if isinstance(model, fx.GraphModule):
        _fuse_graph_pads(model, report)
    if verbose:
        print(report)
    return (model, report) if return_report else model


def _convert_children(module: nn.Module, prefix: str, report: ConversionReport) -> None:
    if type(module) is nn.Sequential:
        _fuse_sequential_pads(module, prefix, report)
    for name, child in list(module.named_children()):
        path = f"{prefix}{name}"
        fused = _fused_module(child, path, report)
        if fused is not None:
            setattr(module, name, fused)
        else:
            _convert_children(child, path + ".", report)


def _has_hooks(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or getattr(module, "_backward_pre_hooks", None))


def _fused_module(module: nn.Module, path: str, report: ConversionReport) -> Optional[nn.Module]:
    """The fused replacement for a single module, or None when it is not one `convert` recognises."""
    fused = None
    timm_kind = _timm_same_conv_kind(module)
    if timm_kind is not None:
        fused = _fused_timm_conv(module, timm_kind)
    elif _is_plain_torch_conv(module):
        pairs = _torch_conv_pairs(module)
        padded = any(pair != (0, 0) for pair in pairs)
        if padded and (module.padding_mode != "zeros" or any(lo != hi for lo, hi in pairs)):
            padding = "same" if module.padding == "same" else pairs
            fused = _fused_from_torch_conv(module, padding, module.padding_mode)
    if fused is None:
        return None
    if _has_hooks(module):
        report.skipped.append((path, f"{type(module).__name__} has hooks, which a new module would lose"))
        return None
    report.replaced.append(Replacement(path, _describe(module), _describe(fused)))
    return fused


def _describe(module: nn.Module) -> str:
    return f"{type(module).__name__}({module.extra_repr()})"


# -- torch convs and padding modules ------------------------------------------------------------------------------

def _is_plain_torch_conv(module: nn.Module) -> bool:
    """A torch.nn.Conv{1,2,3}d, or a subclass that computes exactly what it does (no forward of its own)."""
    for base in _TORCH_CONVS.values():
        if isinstance(module, base):
            cls = type(module)
            return cls.forward is base.forward and cls._conv_forward is base._conv_forward
    return False


def _torch_conv_pairs(conv: nn.Module) -> PadPairs:
    """The (lo, hi) pads torch applies for `conv.padding`; torch's 'same' (stride 1) puts the odd pixel last."""
    if conv.padding == "valid":
        return ((0, 0),) * len(conv.kernel_size)
    if conv.padding == "same":
        return tuple((total // 2, total - total // 2)
                     for total in (d * (k - 1) for k, d in zip(conv.kernel_size, conv.dilation)))
    return tuple((p, p) for p in conv.padding)


def _fused_from_torch_conv(conv: nn.Module, padding, padding_mode: str) -> nn.Module:
    fused = _FUSED_CONVS[len(conv.kernel_size)](
        conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, padding, conv.dilation, conv.groups,
        bias=conv.bias is not None, padding_mode=padding_mode, device="meta")
    return _take_parameters(fused, conv)


def _take_parameters(fused: nn.Module, original: nn.Module) -> nn.Module:
    fused.weight = original.weight
    fused.bias = original.bias
    return fused.train(original.training)


def _pad_pairs(amounts: Sequence[int], spatial_dims: int) -> Optional[PadPairs]:
    """Per-dim (lo, hi) pads, in spatial order, of F.pad-order amounts (last dim first); None for crops or a
    count that does not match the conv."""
    if len(amounts) != 2 * spatial_dims or any(a < 0 for a in amounts):
        return None
    return tuple((amounts[2 * (spatial_dims - 1 - d)], amounts[2 * (spatial_dims - 1 - d) + 1])
                 for d in range(spatial_dims))


def _combined_padding(mode: str, pad_pairs: PadPairs, conv_pairs: PadPairs, conv_mode: str) -> Optional[PadPairs]:
    """One fused padding for `pad` (in `mode`) then the conv's own padding, or None if no single mode does both."""
    if mode == "zeros":
        if conv_mode != "zeros" and any(p != (0, 0) for p in conv_pairs):
            return None
        return tuple((a + c, b + d) for (a, b), (c, d) in zip(pad_pairs, conv_pairs))
    if any(p != (0, 0) for p in conv_pairs):
        return None
    return pad_pairs


def _pad_module_mode(pad: nn.Module) -> Optional[str]:
    mode = _PAD_MODULES.get(type(pad))
    if mode == "zeros" and pad.value != 0:
        return None
    return mode


def _fuse_sequential_pads(sequence: nn.Sequential, prefix: str, report: ConversionReport) -> None:
    names = list(sequence._modules)
    for pad_name, conv_name in zip(names, names[1:]):
        pad, conv = sequence._modules[pad_name], sequence._modules[conv_name]
        mode = _pad_module_mode(pad)
        if mode is None or not _is_plain_torch_conv(conv):
            continue
        path = f"{prefix}{pad_name}+{conv_name}"
        pad_pairs = _pad_pairs(tuple(pad.padding), len(conv.kernel_size))
        padding = None if pad_pairs is None else _combined_padding(mode, pad_pairs, _torch_conv_pairs(conv),
                                                                     conv.padding_mode)
        if padding is None:
            report.skipped.append((path, f"{_describe(pad)} then {_describe(conv)} is not one fused padding"))
            continue
        if _has_hooks(pad) or _has_hooks(conv):
            report.skipped.append((path, "a module of the pair has hooks, which new modules would lose"))
            continue
        fused = _fused_from_torch_conv(conv, padding, mode)
        report.replaced.append(Replacement(path, f"{_describe(pad)} + {_describe(conv)}", _describe(fused)))
        sequence._modules[pad_name] = nn.Identity()
        sequence._modules[conv_name] = fused


# -- timm ---------------------------------------------------------------------------------------------------------

# timm's same-padding convs, by (module, class), with the attribute that says whether their padding is dynamic
# 'same' (None: always). Matched by name, so fastpad needs no timm import, and exactly, so subclasses are left alone.
_TIMM_SAME_CONVS = {
    ("timm.layers.conv2d_same", "Conv2dSame"): None,
    ("timm.layers.conv2d_same", "Conv2dSameExport"): None,
    ("timm.layers.std_conv", "StdConv2dSame"): "same_pad",
    ("timm.layers.std_conv", "ScaledStdConv2dSame"): "same_pad",
    ("timm.layers.cond_conv2d", "CondConv2d"): "dynamic_padding",
}


def _timm_same_conv_kind(module: nn.Module) -> Optional[str]:
    """The class name of a timm same-padding conv whose padding is dynamic 'same', else None."""
    cls = type(module)
    key = (cls.__module__, cls.__name__)
    if key not in _TIMM_SAME_CONVS:
        return None
    dynamic = _TIMM_SAME_CONVS[key]
    return cls.__name__ if dynamic is None or getattr(module, dynamic) else None


def _fused_timm_conv(module: nn.Module, kind: str) -> nn.Module:
    if kind in ("Conv2dSame", "Conv2dSameExport"):
        return _fused_from_torch_conv(module, "same", "zeros")
    # The weight-computing timm convs keep their parameters and attributes; only the class changes, to one whose
    # forward calls the fused op (so state_dict keys, including gain, stay the same).
    fused_class = {"StdConv2dSame": SameStdConv2d, "ScaledStdConv2dSame": SameScaledStdConv2d,
                   "CondConv2d": SameCondConv2d}[kind]
    fused = copy.copy(module)
    fused.__class__ = fused_class
    return fused


def _standardized_weight(conv: nn.Module, gain: Optional[torch.Tensor]) -> torch.Tensor:
    """Weight standardisation as timm computes it: per output channel, batch_norm over the fan-in, times `gain`."""
    per_channel = conv.weight.reshape(1, conv.out_channels, -1)
    standardized = F.batch_norm(per_channel, None, None, weight=gain, training=True, momentum=0.0, eps=conv.eps)
    return standardized.reshape_as(conv.weight)


class SameStdConv2d(nn.Conv2d):
    """timm StdConv2dSame (weight standardisation, TF 'same' padding) calling the fused conv."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return functional.conv2d(input, _standardized_weight(self, None), self.bias, self.stride, "same",
                                 self.dilation, self.groups)

    def extra_repr(self) -> str:
        return super().extra_repr().replace("padding=(0, 0)", "padding='same'")


class SameScaledStdConv2d(nn.Conv2d):
    """timm ScaledStdConv2dSame (scaled weight standardisation, TF 'same' padding) calling the fused conv."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        weight = _standardized_weight(self, (self.gain * self.scale).view(-1))
        return functional.conv2d(input, weight, self.bias, self.stride, "same", self.dilation, self.groups)

    def extra_repr(self) -> str:
        return super().extra_repr().replace("padding=(0, 0)", "padding='same'")


class SameCondConv2d(nn.Module):
    """timm CondConv2d (per-sample mixtures of expert kernels) with TF 'same' padding, calling the fused conv."""

    def forward(self, input: torch.Tensor, routing_weights: torch.Tensor) -> torch.Tensor:
        batch, channels = input.shape[:2]
        # Each sample gets its own kernel: fold the batch into the channels and convolve with groups * batch.
        weight = torch.matmul(routing_weights, self.weight)
        weight = weight.view(batch * self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        bias = None if self.bias is None else torch.matmul(routing_weights, self.bias).view(-1)
        folded = input.reshape(1, batch * channels, *input.shape[2:])
        out = functional.conv2d(folded, weight, bias, self.stride, "same", self.dilation, self.groups * batch)
        return out.view(batch, self.out_channels, *out.shape[2:])

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding='same', num_experts={self.num_experts}")


# -- FX graphs ----------------------------------------------------------------------------------------------------

def _node_arg(node: fx.Node, index: int, name: str, default):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _graph_pad(node: fx.Node) -> Optional[Tuple[fx.Node, Sequence[int], str]]:
    """(input, F.pad-order amounts, fastpad mode) of an `F.pad` node with constant pads, else None."""
    if node.op != "call_function" or node.target is not F.pad:
        return None
    source, amounts = _node_arg(node, 0, "input", None), _node_arg(node, 1, "pad", None)
    mode, value = _node_arg(node, 2, "mode", "constant"), _node_arg(node, 3, "value", None)
    if not isinstance(amounts, (tuple, list)) or not all(isinstance(a, int) for a in amounts):
        return None
    if mode not in _F_PAD_MODES or (mode == "constant" and value not in (None, 0, 0.0)):
        return None
    return source, amounts, _F_PAD_MODES[mode]


def _ints_padding_pairs(padding, spatial_dims: int) -> Optional[PadPairs]:
    if padding == "valid":
        return ((0, 0),) * spatial_dims
    try:
        return tuple((p, p) for p in _geometry.expand_ints("padding", padding, spatial_dims, 0))
    except (TypeError, ValueError):
        return None  # 'same', or a value computed in the graph


def _fuse_graph_pads(graph_module: fx.GraphModule, report: ConversionReport) -> None:
    graph = graph_module.graph
    module_calls: Dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "call_module":
            module_calls[node.target] = module_calls.get(node.target, 0) + 1
    changed = False
    for pad_node in list(graph.nodes):
        pad = _graph_pad(pad_node)
        if pad is None or len(pad_node.users) != 1:
            continue
        source, amounts, mode = pad
        conv_node = next(iter(pad_node.users))
        if conv_node.op == "call_function" and conv_node.target in _FUNCTIONAL_CONVS:
            changed |= _fuse_functional_conv(graph, pad_node, conv_node, source, amounts, mode, report)
        elif conv_node.op == "call_module" and module_calls.get(conv_node.target) == 1:
            changed |= _fuse_module_conv(graph_module, pad_node, conv_node, source, amounts, mode, report)
    if changed:
        graph.lint()
        graph_module.recompile()


def _fuse_functional_conv(graph: fx.Graph, pad_node, conv_node, source, amounts, mode, report) -> bool:
    spatial_dims = _FUNCTIONAL_CONVS[conv_node.target]
    pad_pairs = _pad_pairs(amounts, spatial_dims)
    if _node_arg(conv_node, 0, "input", None) is not pad_node or pad_pairs is None:
        return False
    conv_pairs = _ints_padding_pairs(_node_arg(conv_node, 4, "padding", 0), spatial_dims)
    padding = None if conv_pairs is None else _combined_padding(mode, pad_pairs, conv_pairs, "zeros")
    if padding is None:
        report.skipped.append((conv_node.name, "F.pad then a conv whose padding is not one fused padding"))
        return False
    args = (source, _node_arg(conv_node, 1, "weight", None), _node_arg(conv_node, 2, "bias", None),
            _node_arg(conv_node, 3, "stride", 1), padding, _node_arg(conv_node, 5, "dilation", 1),
            _node_arg(conv_node, 6, "groups", 1), mode)
    fused_function = {1: functional.conv1d, 2: functional.conv2d, 3: functional.conv3d}[spatial_dims]
    with graph.inserting_after(conv_node):
        fused_node = graph.call_function(fused_function, args)
    conv_node.replace_all_uses_with(fused_node)
    graph.erase_node(conv_node)
    graph.erase_node(pad_node)
    report.replaced.append(Replacement(conv_node.name, f"F.pad(mode={mode!r}) + {conv_node.target.__name__}",
                                       f"fastpad.{fused_function.__name__}(padding={padding})"))
    return True


def _fuse_module_conv(graph_module: fx.GraphModule, pad_node, conv_node, source, amounts, mode, report) -> bool:
    conv = graph_module.get_submodule(conv_node.target)
    if not _is_plain_torch_conv(conv) or _has_hooks(conv):
        return False
    pad_pairs = _pad_pairs(amounts, len(conv.kernel_size))
    if pad_pairs is None:
        return False
    padding = _combined_padding(mode, pad_pairs, _torch_conv_pairs(conv), conv.padding_mode)
    if padding is None:
        report.skipped.append((conv_node.target, "F.pad then a conv whose padding is not one fused padding"))
        return False
    fused = _fused_from_torch_conv(conv, padding, mode)
    graph_module.set_submodule(conv_node.target, fused)
    conv_node.args = (source, *conv_node.args[1:])
    graph_module.graph.erase_node(pad_node)
    report.replaced.append(Replacement(conv_node.target, f"F.pad(mode={mode!r}) + {_describe(conv)}",
                                       _describe(fused)))
    return True
