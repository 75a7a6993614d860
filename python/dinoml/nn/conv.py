"""Convolution, normalisation and pooling layers with torch.nn's parameter names and shapes, so a
torchvision model's state_dict loads by name (Conv1d/Conv2d/Conv3d.weight/bias, BatchNorm2d.weight, bias,
running_mean, running_var, num_batches_tracked)."""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .. import ops
from ..module import Module, Parameter

IntPair = Union[int, Sequence[int]]


def _pair(v):
    return (int(v[0]), int(v[1])) if isinstance(v, (list, tuple)) else (int(v), int(v))


class Conv2d(Module):
    """torch.nn.Conv2d (padding_mode 'zeros'): weight [out, in/groups, kH, kW], bias [out]."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair, stride: IntPair = 1,
                 padding: Union[IntPair, str] = 0, dilation: IntPair = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", dtype="float32"):
        if padding_mode != "zeros":
            raise ValueError(f"Conv2d: only padding_mode='zeros' is supported, got {padding_mode!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = _pair(kernel_size), _pair(stride), _pair(dilation)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.groups = groups
        self.weight = Parameter([out_channels, in_channels // groups, *self.kernel_size], dtype)
        self.bias = Parameter([out_channels], dtype) if bias else None

    def forward(self, x):
        return ops.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding,
                          dilation=self.dilation, groups=self.groups)

    def __repr__(self):
        return (f"Conv2d({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, groups={self.groups}, bias={self.bias is not None})")


def _ntuple(v, n):
    return tuple(int(e) for e in v) if isinstance(v, (list, tuple)) else (int(v),) * n


class _ConvNd(Module):
    """torch.nn.Conv1d / Conv3d (padding_mode 'zeros'): weight [out, in/groups, *kernel], bias [out]."""
    _rank = 0
    _fn = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", dtype="float32"):
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported, got {padding_mode!r}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        r = self._rank
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = _ntuple(kernel_size, r), _ntuple(stride, r), _ntuple(dilation, r)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, r)
        self.groups = groups
        self.weight = Parameter([out_channels, in_channels // groups, *self.kernel_size], dtype)
        self.bias = Parameter([out_channels], dtype) if bias else None

    def forward(self, x):
        pad = self.padding
        if not isinstance(pad, str) and self._rank == 1:
            pad = pad[0]
        return type(self)._fn(x, self.weight, self.bias, stride=self.stride, padding=pad, dilation=self.dilation,
                              groups=self.groups)

    def __repr__(self):
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, groups={self.groups}, bias={self.bias is not None})")


class Conv1d(_ConvNd):
    """torch.nn.Conv1d on x[N, C, L]."""
    _rank = 1
    _fn = staticmethod(ops.conv1d)


class Conv3d(_ConvNd):
    """torch.nn.Conv3d on x[N, C, D, H, W]."""
    _rank = 3
    _fn = staticmethod(ops.conv3d)


class BatchNorm2d(Module):
    """torch.nn.BatchNorm2d in eval mode (running statistics). Parameters: weight, bias,
    running_mean, running_var [C] and num_batches_tracked (int64 scalar, unused)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype="float32"):
        if not track_running_stats:
            raise ValueError("BatchNorm2d: inference needs running statistics (track_running_stats=True)")
        self.num_features, self.eps = num_features, eps
        self.weight = Parameter([num_features], dtype) if affine else None
        self.bias = Parameter([num_features], dtype) if affine else None
        self.running_mean = Parameter([num_features], dtype)
        self.running_var = Parameter([num_features], dtype)
        self.num_batches_tracked = Parameter([], "int64")

    def forward(self, x):
        return ops.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, eps=self.eps)


class MaxPool2d(Module):
    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None, padding: IntPair = 0,
                 dilation: IntPair = 1, ceil_mode: bool = False):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, x):
        return ops.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class AvgPool2d(Module):
    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None, padding: IntPair = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        return ops.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, x):
        return ops.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        return ops.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class MaxPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, x):
        return ops.max_pool3d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)


class AvgPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        return ops.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AdaptiveAvgPool2d(Module):
    """Only output_size (1, 1) (global average pooling), as in ResNet."""

    def __init__(self, output_size: IntPair):
        if _pair(output_size) != (1, 1):
            raise ValueError(f"AdaptiveAvgPool2d: only output_size (1, 1) is supported, got {output_size!r}")
        self.output_size = output_size

    def forward(self, x):
        return ops.global_avg_pool2d(x)


class Upsample(Module):
    """torch.nn.Upsample for 4-d inputs, mode 'nearest' or 'bilinear'."""

    def __init__(self, size: Optional[IntPair] = None, scale_factor=None, mode: str = "nearest",
                 align_corners: Optional[bool] = None):
        self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, align_corners

    def forward(self, x):
        return ops.interpolate(x, size=self.size, scale_factor=self.scale_factor, mode=self.mode,
                               align_corners=self.align_corners)


class Flatten(Module):
    """torch.nn.Flatten(start_dim=1, end_dim=-1)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return ops.flatten(x, start_dim=self.start_dim, end_dim=self.end_dim)
