"""`dinoml.nn`: PyTorch-style layers built from dinoml.ops, with torch's parameter names."""
from .attention import MultiheadAttention, TransformerEncoderLayer
from .layers import (GELU, Dropout, Embedding, GroupNorm, Identity, LayerNorm, Linear, ModuleList, ReLU, RMSNorm,
                     Sequential, Sigmoid, SiLU, Softmax, Tanh, linear)

__all__ = ["Linear", "LayerNorm", "RMSNorm", "GroupNorm", "Embedding", "ReLU", "GELU", "SiLU", "Sigmoid", "Tanh",
           "Softmax", "Dropout", "Identity", "Sequential", "ModuleList", "MultiheadAttention",
           "TransformerEncoderLayer", "linear"]
