"""Element types a descriptor query may name: their sizes and floating-point kinds."""
from __future__ import annotations

from typing import Any

from .checks import HardwareError


# Size in bytes of each element type a query may name.  Several spellings are
# accepted because callers come from numpy (``float32``), C (``double``) and
# vendor tables (``fp16``).
_DTYPE_BYTES = {
    "float64": 8, "double": 8, "fp64": 8, "f64": 8,
    "float32": 4, "float": 4, "single": 4, "fp32": 4, "f32": 4,
    "float16": 2, "half": 2, "fp16": 2, "f16": 2,
    "bfloat16": 2, "bf16": 2,
    "int64": 8, "uint64": 8, "int32": 4, "uint32": 4, "int": 4,
    "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool": 1,
}
# The canonical floating-point name of each spelling (the key of the peak tables).
_FLOAT_KIND = {
    **{s: "fp64" for s in ("float64", "double", "fp64", "f64")},
    **{s: "fp32" for s in ("float32", "float", "single", "fp32", "f32")},
    **{s: "fp16" for s in ("float16", "half", "fp16", "f16")},
    **{s: "bf16" for s in ("bfloat16", "bf16")},
    "tf32": "tf32", "tfloat32": "tf32", "fp8": "fp8", "int8": "int8",
}


def _dtype_name(dtype: Any) -> str:
    # numpy dtype objects have .name, numpy scalar types a __name__; strings as they are.
    if isinstance(dtype, type):
        name = dtype.__name__
    else:
        name = getattr(dtype, "name", None) or str(dtype)
    return str(name).strip().lower()


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element of ``dtype`` (a name such as ``"float32"`` or a numpy dtype).

    >>> dtype_bytes("float32"), dtype_bytes("double"), dtype_bytes("bf16")
    (4, 8, 2)
    """
    name = _dtype_name(dtype)
    if name not in _DTYPE_BYTES:
        raise HardwareError(f"unknown element type {name!r}; known: {', '.join(sorted(_DTYPE_BYTES))}")
    return _DTYPE_BYTES[name]
