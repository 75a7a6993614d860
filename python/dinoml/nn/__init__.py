"""`dinoml.nn`: PyTorch-style layers built from dinoml.ops, with torch's parameter names."""
from .conv import (AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, AvgPool3d, BatchNorm2d, Conv1d, Conv2d, Conv3d, Flatten,
                   MaxPool1d, MaxPool2d, MaxPool3d, Upsample)
from .attention import MultiheadAttention, TransformerEncoderLayer
from .layers import (GELU, Dropout, Embedding, GroupNorm, Identity, LayerNorm, Linear, ModuleList, ReLU, RMSNorm,
                     Sequential, Sigmoid, SiLU, Softmax, Tanh, linear)

__all__ = ["Linear", "LayerNorm", "RMSNorm", "GroupNorm", "Embedding", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh",
           "Softmax", "Dropout", "Identity", "Sequential", "ModuleList", "MultiheadAttention",
           "TransformerEncoderLayer", "linear", "Conv1d", "Conv2d", "Conv3d", "BatchNorm2d", "MaxPool1d",
           "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool2d", "Upsample", "Flatten"]
