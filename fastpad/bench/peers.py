"""The peers that `python -m fastpad bench` times beside fastpad (fastpad/bench/runner.py), and the count behind its
"% peak" column.

- compile: torch.compile (inductor, dynamic=False, fullgraph) of the same F.pad + conv function as the pad+conv
  column (fastpad/reference.py), compiled before the timing.
- onnxruntime: one ONNX Conv node (ConvTranspose for a transposed layer) built with onnx's own API, the layer's per-side
  pads in its `pads` attribute, weight and bias as initializers, so that ONNX Runtime reads the input without a padded
  copy; forward only, on the CPU. Only padding mode "zeros" is one node (the other modes need a Pad node in front).
- multiply_adds: the multiply-adds of one forward call; the FMA peak comes from torch.ops.fastpad._cpu_fma_peak
  where the build has that op.

A peer that cannot run a layer raises PeerUnavailable (its column shows '-'); one whose output is off the float64
reference raises PeerWrong and is never timed.
"""
import importlib
import math
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

import torch

from fastpad._geometry import transposed_full_size
from fastpad.cases import ConvCase, dtype_name
from fastpad.reference import relative_error, tolerance

if TYPE_CHECKING:  # optional dependencies, imported where used
    import onnx
    import onnxruntime

ONNX_OPSET = 17
ONNX_IR_VERSION = 8  # the IR version of opset 17, which every onnxruntime that runs opset 17 reads


class PeerUnavailable(Exception):
    """This peer cannot run this layer; the message says why."""


class PeerWrong(Exception):
    """This peer ran the layer, but its output is off the float64 reference by more than the tolerance."""


def multiply_adds(case: ConvCase) -> int:
    """Multiply-adds of one forward call of `case`: every output element of a convolution, or every input element of
    a transposed one, times the channels per group on the other side and the kernel taps."""
    taps = math.prod(case.per_dim(case.kernel))
    if case.transposed:
        return case.batch * case.in_channels * math.prod(case.size) * (case.out_channels // case.groups) * taps
    return (case.batch * case.out_channels * math.prod(case.conv_output_size()) * (case.in_channels // case.groups)
            * taps)


def fma_peak_gflops(seconds: float = 0.3) -> Optional[float]:
    """GFLOP/s of float32 FMAs on all of torch's threads (fastpad's microbenchmark), or None where this build of the
    extension does not have the op."""
    if not hasattr(torch.ops.fastpad, "_cpu_fma_peak") or torch.ops.fastpad._cpu_isa() == "baseline":
        return None  # an older build, or a CPU without AVX2, which the microbenchmark needs
    return float(torch.ops.fastpad._cpu_fma_peak(seconds))


def check_output(peer: str, output: torch.Tensor, expected: torch.Tensor, limit: float) -> float:
    """The relative error (by norm) of a peer's output against the float64 reference; PeerWrong above `limit`."""
    error = relative_error(output, expected)
    if not error <= limit:
        raise PeerWrong(f"{peer}: output off the float64 reference by {error:.1e} (tolerance {limit:.0e})")
    return error


# ---------------------------------------------------------------------------------------------------------------
# torch.compile


def compiled(function: Callable) -> Callable:
    """torch.compile(function), inductor, static shapes, one graph. Dynamo's caches are emptied first: the reference
    functions of all layers share one code object, and past its recompile limit dynamo would quietly run it eager."""
    torch._dynamo.reset()
    return torch.compile(function, dynamic=False, fullgraph=True)


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime


def onnxruntime_version() -> Optional[str]:
    """The installed onnxruntime's version, or None when it (or onnx, which builds the model) is not installed."""
    try:
        importlib.import_module("onnx")
        return importlib.import_module("onnxruntime").__version__
    except ImportError:
        return None


def onnx_node(case: ConvCase) -> Tuple[str, Dict[str, list]]:
    """The op type and attributes of the one ONNX node that computes `case`; PeerUnavailable where none does."""
    kernel, stride, dilation = case.per_dim(case.kernel), case.per_dim(case.stride), case.per_dim(case.dilation)
    attributes = dict(kernel_shape=list(kernel), strides=list(stride), dilations=list(dilation), group=case.groups)
    if case.transposed:
        # ConvTranspose keeps full[pads_begin : full - pads_end + output_padding] of the full output ((i-1)*s + k_eff
        # positions); fastpad keeps full[crop_lo : crop_lo + out_size], zeros (plus the bias) past the full output.
        # So pads_begin = crop_lo, and the rest, full - crop_lo - out_size, is an end pad where it is positive and
        # an output_padding where it is negative.
        crop_lo, out_size = case.crops()
        end_pads, output_padding = [], []
        for i, lo, out, k, s, d in zip(case.size, crop_lo, out_size, kernel, stride, dilation):
            rest = transposed_full_size(i, k, s, d) - lo - out
            end_pads.append(max(rest, 0))
            output_padding.append(max(-rest, 0))
        if any(lo < 0 for lo in crop_lo):
            raise PeerUnavailable(f"crop_lo {crop_lo} starts before the full output: no ConvTranspose pads do that")
        if any(extra >= s for extra, s in zip(output_padding, stride)):
            raise PeerUnavailable(f"the output reaches {output_padding} past the full output, and onnxruntime takes "
                                  f"output_padding < stride {list(stride)} only")
        return "ConvTranspose", dict(attributes, pads=crop_lo + end_pads, output_padding=output_padding)
    if case.padding_mode != "zeros":
        raise PeerUnavailable(f"padding_mode {case.padding_mode!r} needs a Pad node in front of the Conv")
    pads = case.pads()
    if any(amount < 0 for pair in pads for amount in pair):
        raise PeerUnavailable(f"negative pads {pads} (a crop): ONNX Conv pads are >= 0")
    return "Conv", dict(attributes, pads=[lo for lo, _ in pads] + [hi for _, hi in pads])


def onnx_model(case: ConvCase, weight: torch.Tensor, bias: Optional[torch.Tensor], dtype: torch.dtype,
               output_shape) -> "onnx.ModelProto":
    """The one-node ONNX model of `case` in `dtype` (float32 or float64), weight and bias as initializers: input "x"
    of the case's input shape, output "y" of `output_shape`."""
    import onnx
    from onnx import helper, numpy_helper

    op_type, attributes = onnx_node(case)
    element_type = helper.np_dtype_to_tensor_dtype(torch.empty(0, dtype=dtype).numpy().dtype)
    initializers = [numpy_helper.from_array(weight.detach().to("cpu", dtype).contiguous().numpy(), "w")]
    if bias is not None:
        initializers.append(numpy_helper.from_array(bias.detach().to("cpu", dtype).contiguous().numpy(), "b"))
    node = helper.make_node(op_type, ["x", "w"] + (["b"] if bias is not None else []), ["y"], **attributes)
    graph = helper.make_graph(
        [node], case.op_name, [helper.make_tensor_value_info("x", element_type, list(case.input_shape()))],
        [helper.make_tensor_value_info("y", element_type, list(output_shape))], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)])
    model.ir_version = ONNX_IR_VERSION
    onnx.checker.check_model(model)
    return model


def onnx_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the ONNX model for a run in `dtype`: numpy (and so onnxruntime's Python API) has no bfloat16, so
    bfloat16 runs use float32 models."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def ort_options(threads: int) -> "onnxruntime.SessionOptions":
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only
    # ORT's pool threads spin after each run by default, which would take the cores from the variant timed next.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class OnnxRuntimeConv:
    """`case` as a one-node ONNX model loaded into onnxruntime on the CPU, bound once to a numpy copy of x (NCHW
    contiguous, in the model's dtype) and a preallocated output; run() runs it on those."""

    def __init__(self, case: ConvCase, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                 output_shape, threads: int):
        import numpy
        import onnxruntime

        dtype = onnx_dtype(x.dtype)
        model = onnx_model(case, weight, bias, dtype, output_shape)
        try:
            self.ort = onnxruntime.InferenceSession(model.SerializeToString(), ort_options(threads),
                                                    providers=["CPUExecutionProvider"])
        except Exception as error:  # e.g. NOT_IMPLEMENTED: no float64 Conv on the CPU
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise PeerUnavailable(f"onnxruntime refused the {dtype_name(dtype)} model: {first_line}") from error
        self.x = x.detach().to("cpu", dtype).contiguous().numpy()
        self.y = numpy.empty(tuple(output_shape), dtype=self.x.dtype)
        self.binding = self.ort.io_binding()
        self.binding.bind_cpu_input("x", self.x)
        self.binding.bind_output("y", "cpu", 0, self.y.dtype, list(self.y.shape), self.y.ctypes.data)

    def run(self) -> None:
        self.ort.run_with_iobinding(self.binding)

    def output(self) -> torch.Tensor:
        """The output of the last run (the preallocated buffer itself)."""
        return torch.from_numpy(self.y)


def onnxruntime_conv(case: ConvCase, inputs, expected: torch.Tensor, threads: int) -> OnnxRuntimeConv:
    """The checked onnxruntime peer of `case` on `inputs` (x, weight[, bias]): run once and compared with the float64
    reference output `expected` to the tolerance of the model's dtype (PeerWrong beyond it)."""
    x, weight = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    peer = OnnxRuntimeConv(case, x, weight, bias, expected.shape, threads)
    peer.run()
    check_output("onnxruntime", peer.output(), expected, tolerance(onnx_dtype(x.dtype)))
    return peer
