"""fastpad: convolutions whose padding (TF/Keras 'same' at any stride, asymmetric, causal, reflect, replicate,
circular) and transposed-convolution crops are fused into the kernels, so no padded copy of the input is built.

    import fastpad
    y = fastpad.conv2d(x, w, stride=2)                        # TF/Keras SAME
    y = fastpad.conv1d(x, w, padding="causal")                # causal
    y = fastpad.conv2d(x, w, padding=((0, 1), (2, 3)))        # per-side pads
    y = fastpad.conv_transpose2d(x, w, stride=2)              # out = in * stride (TF conv2d_transpose SAME)
    layer = fastpad.nn.Conv2d(3, 32, 3, stride=2)             # drop-in for torch.nn.Conv2d
    model = fastpad.convert(model)                            # timm Conv2dSame, pad + conv pairs -> fused
    model = fastpad.convert(model, example_inputs=x)          # also the pads inside forward (torch.export)
    compiled = torch.compile(model, backend="fastpad")        # inductor, after fusing every pad into its conv
"""
from . import nn
from ._geometry import same_padding
from .backend import compile_backend
from ._convert import convert
from .functional import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d

__version__ = "0.1.0"

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "same_padding", "nn", "convert", "compile_backend", "__version__",
]
