"""`fastpad.convert(model)`: swaps the padded convolutions of an existing model for fused fastpad layers.

It recognises timm's same-padding convs, torch convs whose padding torch cannot fuse, `nn.Sequential` runs of a
padding module followed by a conv, and (in an FX graph) `F.pad` -> conv. Parameters are moved, never copied, so
state_dict keys and values stay the same.
"""
from __future__ import annotations

import copy
import operator
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import fx, nn

from . import functional
from . import nn as fused_nn
from ._graph_fusion import (TORCH_CONV_MODULES, Replacement, count_pad_ops, fuse_padded_convolutions, has_hooks,
                            plain_torch_module_dims, torch_padding_pairs)

PadPairs = Tuple[Tuple[int, int], ...]
ExampleInputs = Union[torch.Tensor, Tuple, None]

_FUSED_CONVS = {1: fused_nn.Conv1d, 2: fused_nn.Conv2d, 3: fused_nn.Conv3d}
_PAD_MODULES = {
    **{cls: "zeros" for cls in (nn.ZeroPad1d, nn.ZeroPad2d, nn.ZeroPad3d,
                                nn.ConstantPad1d, nn.ConstantPad2d, nn.ConstantPad3d)},
    **{cls: "reflect" for cls in (nn.ReflectionPad1d, nn.ReflectionPad2d, nn.ReflectionPad3d)},
    **{cls: "replicate" for cls in (nn.ReplicationPad1d, nn.ReplicationPad2d, nn.ReplicationPad3d)},
    **{cls: "circular" for cls in (nn.CircularPad1d, nn.CircularPad2d, nn.CircularPad3d)},
}


@dataclass
class ConversionReport:
    """What `convert` replaced, what it recognised but left alone (with the reason), how it got there (`path`: the
    modules only, or the modules and then a graph), and for a graph the pad ops still in it."""
    replaced: List[Replacement]
    skipped: List[Tuple[str, str]]
    path: str = "modules"
    pad_ops_left: Optional[int] = None

    def __str__(self) -> str:
        lines = [f"fastpad.convert: {len(self.replaced)} replaced, {len(self.skipped)} left as they were; "
                 f"path: {self.path}"]
        if self.pad_ops_left is not None:
            lines.append(f"  pad ops left in the graph: {self.pad_ops_left}")
        lines += [f"  replaced {r}" for r in self.replaced]
        lines += [f"  skipped  {path or '<root>'}: {reason}" for path, reason in self.skipped]
        return "\n".join(lines)


def convert(model: nn.Module, inplace: bool = False, *, example_inputs: ExampleInputs = None, trace: bool = False,
            verbose: bool = False, return_report: bool = False) -> Union[nn.Module, Tuple[nn.Module, ConversionReport]]:
    """Returns `model` with every padded convolution it recognises replaced by a fused fastpad layer or op.

    Recognised in the modules:
      - timm `Conv2dSame` and `Conv2dSameExport` -> `fastpad.nn.Conv2d(padding="same")`; timm `StdConv2dSame`,
        `ScaledStdConv2dSame` and `CondConv2d` with dynamic 'same' padding keep their weight computation and
        call the fused op;
      - `torch.nn.Conv{1,2,3}d` with `padding="same"` and an even effective kernel (an asymmetric split), or with a
        `padding_mode` other than "zeros";
      - in an `nn.Sequential`, a padding module (`ZeroPad*`, `ConstantPad*` with value 0, `ReflectionPad*`,
        `ReplicationPad*`, `CircularPad*`) followed by a torch conv: the pad becomes `nn.Identity()` and the conv
        a fused layer at the same index, so state_dict keys do not move.
    Parameters are moved into the new layers (the same `nn.Parameter` objects), so weights, device, dtype and
    requires_grad are kept; so is train/eval mode. Modules with hooks are left alone and listed as skipped.

    Pads computed inside `forward` (`F.pad` before a conv, a crop after a transposed conv) are seen in a graph, with
    the rewrite of `torch.compile(backend="fastpad")`:
      - example_inputs: a tensor or a tuple of positional arguments. The converted model's `forward` is captured with
        `torch.export` (every dim dynamic where the model allows it: the report says which stayed so) and its
        pads fused; the result is a `torch.fx.GraphModule` that runs eagerly, computing as `model` did in the
        train/eval mode it had (torch.export fixes it: `.train()` and `.eval()` on the result raise);
      - a `torch.fx.GraphModule` model, or `trace=True` (which traces with `torch.fx.symbolic_trace`): the pads
        of that graph.

    inplace: change `model` itself instead of a deep copy (the module step). verbose: print the report.
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
    if example_inputs is not None and not isinstance(example_inputs, (torch.Tensor, tuple)):
        raise TypeError(f"fastpad.convert: example_inputs must be a tensor or a tuple of positional arguments, got "
                        f"{type(example_inputs).__name__}")
    if example_inputs is not None and trace:
        raise ValueError("fastpad.convert: pass example_inputs (torch.export) or trace=True (torch.fx), not both")
    if not inplace:
        model = copy.deepcopy(model)
    report = ConversionReport([], [])
    root = _fused_module(model, "", report)
    if root is not None:
        model = root
    else:
        _convert_children(model, "", report)
    if example_inputs is not None:
        model = _exported(model, example_inputs if isinstance(example_inputs, tuple) else (example_inputs,), report)
    else:
        if trace and not isinstance(model, fx.GraphModule):
            model = fx.symbolic_trace(model)
        if isinstance(model, fx.GraphModule):
            _fuse_graph(model, report, "modules, then the FX graph")
    if verbose:
        print(report)
    return (model, report) if return_report else model


def _fuse_graph(graph_module: fx.GraphModule, report: ConversionReport, path: str) -> None:
    fusions = fuse_padded_convolutions(graph_module)
    report.replaced += fusions.replaced
    report.skipped += fusions.skipped
    report.path = path
    report.pad_ops_left = count_pad_ops(graph_module.graph)


def _exported(model: nn.Module, args: tuple, report: ConversionReport) -> fx.GraphModule:
    """`model.forward` captured by torch.export with every dim of the tensor arguments dynamic where the model lets
    it be (channels, and sizes the model branches on, become static), its pads fused."""
    dynamic_shapes = tuple({dim: torch.export.Dim.AUTO for dim in range(arg.dim())}
                           if isinstance(arg, torch.Tensor) else None for arg in args)
    try:
        exported = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    except Exception as error:  # torch.export raises many kinds; all mean the same here
        raise RuntimeError(f"fastpad.convert: torch.export could not capture {type(model).__name__}.forward with "
                           f"these example_inputs ({type(error).__name__}: {error}). Without example_inputs, "
                           f"convert replaces the modules it recognises.") from error
    inputs = [node for node in exported.graph.nodes
              if node.op == "placeholder" and node.name in exported.graph_signature.user_inputs]
    dynamic = [f"input {index} dims {[dim for dim, size in enumerate(value.shape) if not isinstance(size, int)]}"
               for index, value in enumerate(node.meta.get("val") for node in inputs)
               if isinstance(value, torch.Tensor)]
    graph_module = exported.module()
    _relink_parameter_aliases(graph_module)
    _fuse_graph(graph_module, report, f"modules, then the torch.export graph (dynamic: {', '.join(dynamic)})")
    return graph_module


def _relink_parameter_aliases(graph_module: fx.GraphModule) -> None:
    """Reads parameters where the exported graph reads a constant that is the same tensor as a parameter.

    torch.export lifts a tensor that forward reaches other than as a module attribute into a constant: Keras 3, for
    one, hands its convolutions `variable.value`, which is the parameter's data without its autograd identity. The
    constant then shares the parameter's memory, so the output stays right, but no gradient would reach the
    parameter, as one does in the eager model."""
    parameters = {_tensor_identity(p): name for name, p in graph_module.named_parameters()}
    for node in graph_module.graph.nodes:
        if node.op != "get_attr":
            continue
        value = operator.attrgetter(node.target)(graph_module)
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
            node.target = parameters.get(_tensor_identity(value), node.target)
    graph_module.graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()


def _tensor_identity(tensor: torch.Tensor) -> tuple:
    """What makes two tensors the same values: the memory, the view of it, the dtype."""
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()),
            tensor.dtype, tensor.device)


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
    if has_hooks(module):
        report.skipped.append((path, f"{type(module).__name__} has hooks, which a new module would lose"))
        return None
    report.replaced.append(Replacement(path, _describe(module), _describe(fused)))
    return fused


def _describe(module: nn.Module) -> str:
    return f"{type(module).__name__}({module.extra_repr()})"


# -- torch convs and padding modules ------------------------------------------------------------------------------

def _is_plain_torch_conv(module: nn.Module) -> bool:
    return plain_torch_module_dims(module, TORCH_CONV_MODULES) is not None


def _torch_conv_pairs(conv: nn.Module) -> PadPairs:
    return torch_padding_pairs(conv.padding, conv.kernel_size, conv.dilation)


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
        if has_hooks(pad) or has_hooks(conv):
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
