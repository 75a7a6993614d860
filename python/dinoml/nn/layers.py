"""Basic layers with PyTorch's parameter names and shapes, so a torch state_dict loads by name
(`trace(model, ..., constants=torch_module.state_dict())`)."""
from __future__ import annotations

from typing import Iterable, Sequence, Union

from .. import ops
from ..module import Module, Parameter


def linear(x, weight, bias=None):
    """x @ weightᵀ (+ bias) with weight [out, in] (PyTorch layout): gemm_rcr[_bias]."""
    return ops.gemm_rcr_bias(x, weight, bias) if bias is not None else ops.gemm_rcr(x, weight)


class Linear(Module):
    """y = x·Wᵀ + b with weight [out_features, in_features] and bias [out_features]."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype="float32"):
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter([out_features, in_features], dtype)
        self.bias = Parameter([out_features], dtype) if bias else None

    def forward(self, x):
        return linear(x, self.weight, self.bias)

    def __repr__(self):
        return f"Linear({self.in_features}, {self.out_features}, bias={self.bias is not None})"


def _shape(s: Union[int, Sequence[int]]):
    return [int(s)] if isinstance(s, int) else [int(v) for v in s]


class LayerNorm(Module):
    """Layer norm over the trailing `normalized_shape` dims; weight/bias of that shape."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, dtype="float32"):
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.weight = Parameter(self.normalized_shape, dtype) if elementwise_affine else None
        self.bias = Parameter(self.normalized_shape, dtype) if elementwise_affine else None

    def forward(self, x):
        return ops.layer_norm(x, self.weight, self.bias, eps=self.eps,
                              normalized_ndim=len(self.normalized_shape))


class RMSNorm(Module):
    """x / sqrt(mean(x²) + eps) · weight over the last dim."""

    def __init__(self, normalized_shape: int, eps: float = 1e-6, elementwise_affine: bool = True, dtype="float32"):
        self.eps = eps
        self.weight = Parameter(_shape(normalized_shape), dtype) if elementwise_affine else None

    def forward(self, x):
        return ops.rms_norm(x, self.weight, eps=self.eps)


class GroupNorm(Module):
    """Group norm of x[N, C, ...]; weight/bias [C]."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, dtype="float32"):
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.eps = eps
        self.weight = Parameter([num_channels], dtype) if affine else None
        self.bias = Parameter([num_channels], dtype) if affine else None

    def forward(self, x):
        return ops.group_norm(x, gamma=self.weight, beta=self.bias, num_groups=self.num_groups, eps=self.eps)


class Embedding(Module):
    """Rows of weight[num_embeddings, embedding_dim] selected by integer indices."""

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype="float32"):
        self.weight = Parameter([num_embeddings, embedding_dim], dtype)

    def forward(self, indices):
        return ops.embedding(indices, self.weight)


class ReLU(Module):
    def forward(self, x):
        return ops.relu(x)


class GELU(Module):
    """approximate="none": erf form (gelu); "tanh": tanh form (fast_gelu)."""

    def __init__(self, approximate: str = "none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return ops.fast_gelu(x) if self.approximate == "tanh" else ops.gelu(x)


class SiLU(Module):
    def forward(self, x):
        return ops.silu(x)


class Sigmoid(Module):
    def forward(self, x):
        return ops.sigmoid(x)


class Tanh(Module):
    def forward(self, x):
        return ops.tanh(x)


class Softmax(Module):
    def __init__(self, dim: int = -1):
        self.dim = dim

    def forward(self, x):
        return ops.softmax(x, axis=self.dim)


class Dropout(Module):
    """Identity: compiled models run in inference mode."""

    def __init__(self, p: float = 0.5):
        self.p = p

    def forward(self, x):
        return x


class Identity(Module):
    def forward(self, x):
        return x


class ModuleList(Module):
    """A list of modules; children are named "0", "1", ... like PyTorch."""

    def __init__(self, modules: Iterable[Module] = ()):
        self._items = list(modules)

    def _children_items(self):
        return ((str(i), m) for i, m in enumerate(self._items))

    def append(self, m: Module):
        self._items.append(m)
        return self

    def extend(self, ms: Iterable[Module]):
        self._items.extend(ms)
        return self

    def __getitem__(self, i):
        return self._items[i]

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def forward(self, *args, **kwargs):
        raise TypeError("ModuleList has no forward: iterate over it")


class Sequential(ModuleList):
    """Applies its modules in order; children are named "0", "1", ..."""

    def __init__(self, *modules: Module):
        super().__init__(modules)

    def forward(self, x):
        for m in self._items:
            x = m(x)
        return x
