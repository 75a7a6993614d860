"""DinoML dtype names and their numpy counterparts."""
from __future__ import annotations

import numpy as np

from ._ext import ext

#: numpy dtype used for values of each DinoML dtype (bfloat16 values travel as float32 arrays
#: or as uint16 bit patterns; results come back as float32).
NUMPY_DTYPE = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.float32),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}

FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def canonical(dtype) -> str:
    """'fp32' / np.float32 / torch.float32 / 'float32' -> 'float32'; ValueError if unknown."""
    if isinstance(dtype, str):
        return ext.canonical_dtype(dtype)
    name = getattr(dtype, "name", None) if not isinstance(dtype, type) else None
    if name is None:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype).replace("torch.", "")
    return ext.canonical_dtype(str(name).replace("torch.", ""))


def of_numpy(arr: np.ndarray) -> str | None:
    """DinoML dtype of a numpy array, None when DinoML has no equivalent (float64 ...)."""
    for name, dt in NUMPY_DTYPE.items():
        if name != "bfloat16" and arr.dtype == dt:
            return name
    return None


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES
