"""Targets: the back ends a lowered program is compiled for (see :mod:`.base`).

    >>> NAMES
    ('openmp', 'llvm', 'cuda', 'cuda-emulate')
"""
from __future__ import annotations

from ..errors import PolytileError
from .base import Lowered, Target

#: Every target name, in the order ``--help`` lists them.
NAMES = ("openmp", "llvm", "cuda", "cuda-emulate")


def get(name: str) -> Target:
    """The target called ``name`` (its module is imported on first use).

    >>> get("openmp").name
    'openmp'
    """
    if name == "openmp":
        from .openmp import OPENMP

        return OPENMP
    if name == "llvm":
        from .llvm import LLVM_TARGET

        return LLVM_TARGET
    if name in ("cuda", "cuda-emulate"):
        from .cuda import CUDA, CUDA_EMULATE

        return CUDA if name == "cuda" else CUDA_EMULATE
    raise PolytileError(f"unknown target {name!r}; available: {', '.join(NAMES)}")


__all__ = ["NAMES", "Lowered", "Target", "get"]
