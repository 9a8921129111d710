"""The benchmark suite: real layers whose padding PyTorch cannot express without an F.pad copy.

Each layer is named after the model it comes from. Sizes are per spatial dimension (square or cubic inputs).
`batch` is the default batch size, picked so that one forward pass takes milliseconds, not seconds, on a 2-core CPU;
`python -m fastpad bench --batch N` overrides it for every layer.
"""
from dataclasses import dataclass
from typing import Tuple, Union

from fastpad.reference import ConvCall

Padding = Union[str, int, Tuple]


@dataclass(frozen=True)
class Layer:
    name: str
    model: str
    kind: str  # "conv" or "conv_transpose"
    dims: int  # spatial dimensions: 1, 2 or 3
    in_channels: int
    out_channels: int
    kernel: int
    stride: int
    padding: Padding
    input_size: int
    batch: int
    padding_mode: str = "zeros"
    groups: int = 1
    dilation: int = 1
    bias: bool = True

    @property
    def transposed(self) -> bool:
        return self.kind == "conv_transpose"

    @property
    def call(self) -> ConvCall:
        return ConvCall(self.transposed, self.dims, (self.kernel,) * self.dims, self.stride, self.padding,
                        self.dilation, self.groups, self.padding_mode)

    @property
    def spatial_size(self) -> Tuple[int, ...]:
        return (self.input_size,) * self.dims

    def input_shape(self, batch: int) -> Tuple[int, ...]:
        return (batch, self.in_channels) + self.spatial_size

    def weight_shape(self) -> Tuple[int, ...]:
        kernel = (self.kernel,) * self.dims
        if self.transposed:
            return (self.in_channels, self.out_channels // self.groups) + kernel
        return (self.out_channels, self.in_channels // self.groups) + kernel

    def describe(self, batch: int) -> str:
        """e.g. '8x96x112x112 k3 s2 same g96'"""
        shape = "x".join(str(n) for n in self.input_shape(batch))
        mode = "" if self.padding_mode == "zeros" else f" {self.padding_mode}"
        groups = "" if self.groups == 1 else f" g{self.groups}"
        return f"{shape}->{self.out_channels} k{self.kernel} s{self.stride} {self.padding}{mode}{groups}"


SUITE = [
    # tf_efficientnet_b0 @224: timm's Conv2dSame pads every stride-2 layer with F.pad (TF 'SAME' is asymmetric).
    Layer("tf_efficientnet_b0.stem", "tf_efficientnet_b0", "conv", 2, 3, 32, 3, 2, "same", 224, batch=8,
          bias=False),
    Layer("tf_efficientnet_b0.dw_k3s2_c96", "tf_efficientnet_b0", "conv", 2, 96, 96, 3, 2, "same", 112, batch=8,
          groups=96, bias=False),
    Layer("tf_efficientnet_b0.dw_k5s2_c144", "tf_efficientnet_b0", "conv", 2, 144, 144, 5, 2, "same", 56, batch=8,
          groups=144, bias=False),
    # A dense strided 3x3 with TF 'SAME' (pads (0, 1)), as in TF ports of ResNet-style backbones.
    Layer("resnet50.dense_k3s2_c128", "ResNet-50 (TF port)", "conv", 2, 128, 128, 3, 2, "same", 56, batch=8,
          bias=False),
    # UNet decoder upsampling with TF/Keras Conv2DTranspose(padding='same').
    Layer("unet_decoder.convT_k4s2_c128", "UNet decoder", "conv_transpose", 2, 128, 64, 4, 2, "same", 64, batch=2),
    # Mamba's short causal depthwise conv1d over the sequence.
    Layer("mamba.causal_dw_k4_c1536", "Mamba", "conv", 1, 1536, 1536, 4, 1, "causal", 4096, batch=2, groups=1536),
    # EnCodec's SConv1d: reflect padding, here (2, 2) for L=24000, k8, s4, which is what 'same' gives.
    Layer("encodec.conv_k8s4_reflect", "EnCodec", "conv", 1, 64, 128, 8, 4, "same", 24000, batch=2,
          padding_mode="reflect"),
]
