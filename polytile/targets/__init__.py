"""Targets: the back ends a lowered program is compiled for (see :mod:`.base`).

    >>> NAMES
    ('openmp', 'llvm', 'cuda', 'cuda-emulate')
"""
from __future__ import annotations

from ..errors import OptionError
from .base import Lowered, Target

#: Every target name, in the order ``--help`` lists them.
NAMES = ("openmp", "llvm", "cuda", "cuda-emulate")


def default_name() -> str:
    """The target used when none is named: ``openmp`` where a C compiler is found (``POLYTILE_CC``,
    ``CC``, else ``cc``/``gcc`` on PATH), ``llvm`` (in-process, no compiler needed) where none is.

    >>> default_name() in ("openmp", "llvm")
    True
    """
    from ..config import debug_log, get_config
    from ..errors import ToolchainError
    from ..runtime.compiler import resolve_compiler

    try:
        resolve_compiler(get_config().cc)
    except ToolchainError as exc:
        debug_log(1, "targets", f"default target llvm: {exc}")
        return "llvm"
    return "openmp"


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
    raise OptionError(f"unknown target {name!r}; available: {', '.join(NAMES)}")


__all__ = ["NAMES", "Lowered", "Target", "default_name", "get"]
