"""The benchmark suite: real layers whose padding PyTorch cannot express without an F.pad copy.

Each layer is named after the model it comes from. Sizes are per spatial dimension (square or cubic inputs).
`batch` is the default batch size, picked so that one forward pass takes milliseconds, not seconds, on a 2-core CPU;
`python -m fastpad bench --batch N` overrides it for every layer.
"""
from dataclasses import dataclass

from fastpad.cases import ConvCase


@dataclass(frozen=True)
class Layer:
    """A named case of the suite: `case.batch` is the default batch size."""
    name: str
    model: str
    case: ConvCase


def conv(name: str, model: str, in_channels: int, out_channels: int, kernel: int, stride: int, padding, size: int,
         batch: int, dims: int = 2, transposed: bool = False, **arguments) -> Layer:
    """A layer with square (or cubic) kernel and input; `arguments` are further ConvCase fields."""
    return Layer(name, model, ConvCase(transposed, (size,) * dims, in_channels, out_channels, kernel, stride, padding,
                                       batch=batch, **arguments))


def efficientnet_depthwise(model: str, channels: int, kernel: int, stride: int, size: int, batch: int) -> Layer:
    """A depthwise conv of a TF-ported EfficientNet/MobileNet: timm's Conv2dSame pads it with F.pad ('SAME')."""
    return conv(f"{model}.dw_k{kernel}s{stride}_c{channels}", model, channels, channels, kernel, stride, "same", size,
                batch, groups=channels, bias=False)


def tf_stem(model: str, out_channels: int, size: int, batch: int) -> Layer:
    return conv(f"{model}.stem_k3s2", model, 3, out_channels, 3, 2, "same", size, batch, bias=False)


SUITE = [
    # tf_efficientnet_b0 @224 (timm): every stride-2 layer is TF 'SAME', i.e. asymmetric pads (0, 1) or (1, 2).
    tf_stem("tf_efficientnet_b0", 32, 224, batch=8),
    efficientnet_depthwise("tf_efficientnet_b0", 96, 3, 2, 112, batch=8),
    efficientnet_depthwise("tf_efficientnet_b0", 144, 5, 2, 56, batch=8),
    efficientnet_depthwise("tf_efficientnet_b0", 240, 3, 2, 28, batch=16),
    efficientnet_depthwise("tf_efficientnet_b0", 672, 5, 2, 14, batch=16),
    # Control: stride 1, odd kernel, so 'same' is symmetric (2, 2) and torch's padding='same' needs no F.pad.
    efficientnet_depthwise("tf_efficientnet_b0", 480, 5, 1, 14, batch=16),
    # tf_efficientnet_b4 @380.
    tf_stem("tf_efficientnet_b4", 48, 380, batch=4),
    efficientnet_depthwise("tf_efficientnet_b4", 144, 3, 2, 190, batch=4),
    efficientnet_depthwise("tf_efficientnet_b4", 192, 5, 2, 95, batch=4),
    efficientnet_depthwise("tf_efficientnet_b4", 960, 5, 2, 24, batch=8),
    # tf_mobilenetv3_large_100 @224.
    efficientnet_depthwise("tf_mobilenetv3_large_100", 64, 3, 2, 112, batch=8),
    efficientnet_depthwise("tf_mobilenetv3_large_100", 72, 5, 2, 56, batch=8),
    efficientnet_depthwise("tf_mobilenetv3_large_100", 672, 5, 2, 14, batch=16),
    # ResNet-50 (TF port): the 7x7 stride-2 stem with SAME pads (2, 3), and a dense strided 3x3 (pads (0, 1)).
    conv("resnet50.stem_k7s2", "ResNet-50 (TF port)", 3, 64, 7, 2, "same", 224, batch=4, bias=False),
    conv("resnet50.dense_k3s2_c128", "ResNet-50 (TF port)", 128, 128, 3, 2, "same", 56, batch=4, bias=False),
    # Control: a dense stride-1 3x3, symmetric (1, 1).
    conv("resnet50.dense_k3s1_c64", "ResNet-50", 64, 64, 3, 1, "same", 56, batch=4, bias=False),
    # An even kernel: stride-1 'same' with k=4 pads (1, 2), which torch's padding='same' does with an F.pad copy.
    conv("even_kernel.k4s1_c64", "even kernel", 64, 64, 4, 1, "same", 56, batch=4),
    # UNet decoder upsampling: the classic k2 s2 (no crop), and Keras Conv2DTranspose(padding='same') k4 s2.
    conv("unet_decoder.convT_k2s2_c512", "UNet decoder", 512, 256, 2, 2, "same", 32, batch=2, transposed=True),
    conv("unet_decoder.convT_k4s2_c128", "UNet decoder", 128, 64, 4, 2, "same", 64, batch=2, transposed=True),
    # HiFi-GAN generator upsampling: ConvTranspose1d with 'same' crops.
    conv("hifigan.convT1d_k16s8_c512", "HiFi-GAN", 512, 256, 16, 8, "same", 32, batch=16, dims=1, transposed=True),
    conv("hifigan.convT1d_k4s2_c128", "HiFi-GAN", 128, 64, 4, 2, "same", 2048, batch=16, dims=1, transposed=True),
    # EnCodec's SConv1d: reflect padding, here (2, 2) for L=24000, k8, s4, which is what 'same' gives.
    conv("encodec.conv1d_k8s4_reflect", "EnCodec", 64, 128, 8, 4, "same", 24000, batch=2, dims=1,
         padding_mode="reflect"),
    # Mamba's short causal depthwise conv1d over the sequence: pads (3, 0).
    conv("mamba.causal_dw1d_k4_c1536", "Mamba", 1536, 1536, 4, 1, "causal", 4096, batch=2, dims=1,
         groups=1536),
]
