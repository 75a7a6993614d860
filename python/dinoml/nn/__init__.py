"""`dinoml.nn`: PyTorch-style layers built from dinoml.ops, with torch's parameter names."""
from .conv import AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv2d, Flatten, MaxPool2d, Upsample
from .attention import MultiheadAttention, TransformerEncoderLayer
from .layers import (GELU, Dropout, Embedding, GroupNorm, Identity, LayerNorm, Linear, ModuleList, ReLU, RMSNorm,
                     Sequential, Sigmoid, SiLU, Softmax, Tanh, linear)

__all__ = ["Linear", "LayerNorm", "RMSNorm", "GroupNorm", "Embedding", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh",
           "Softmax", "Dropout", "Identity", "Sequential", "ModuleList", "MultiheadAttention",
           "TransformerEncoderLayer", "linear", "Conv2d", "BatchNorm2d", "MaxPool2d",
           "AvgPool2d", "AdaptiveAvgPool2d", "Upsample", "Flatten"]
