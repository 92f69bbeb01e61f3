"""Running the C / CUDA compiler.

Every subprocess here takes an argument list, never a shell string, so no
part of a kernel name, flag or path is ever interpreted by a shell.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from typing import Sequence

from polytile.errors import CompilerError, ToolchainError

# Generous: --version is instant on every real compiler; the limit only stops
# a wrapper script that hangs from hanging polytile too.
_VERSION_TIMEOUT_S = 60

_version_lock = threading.Lock()
_versions: dict[str, str] = {}

# Which environment variable selects each kind of compiler, for error messages.
_ENV_VAR = {"c": "POLYTILE_CC", "cuda": "POLYTILE_NVCC"}


def resolve_compiler(cc: str, lang: str = "c") -> str:
    """Absolute path of the compiler ``cc`` (a name on PATH or a path).

    Raises ToolchainError naming the compiler and the variable that sets it.

    >>> resolve_compiler("cc")          # doctest: +SKIP
    '/usr/bin/cc'
    """
    var = _ENV_VAR.get(lang, "POLYTILE_CC")
    found = shutil.which(cc) if cc else None
    if found is None:
        what = "CUDA compiler" if lang == "cuda" else "C compiler"
        raise ToolchainError(
            f"{what} {cc!r} not found or not executable; install it or set {var} "
            f"to the path of a working compiler"
        )
    return os.path.abspath(found)


def compiler_version(cc: str, lang: str = "c") -> str:
    """First line of ``cc --version``, cached per resolved compiler path.

    The version is part of every cache key, so upgrading the compiler
    recompiles kernels instead of loading libraries it did not build.

    >>> compiler_version("cc")          # doctest: +SKIP
    'cc (Debian 12.2.0-14+deb12u1) 12.2.0'
    """
    path = resolve_compiler(cc, lang)
    with _version_lock:
        cached = _versions.get(path)
    if cached is not None:
        return cached
    var = _ENV_VAR.get(lang, "POLYTILE_CC")
    try:
        proc = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_VERSION_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"cannot run compiler {path!r} ({exc}); set {var} to a working compiler") from None
    output = proc.stdout.strip() or proc.stderr.strip()
    if proc.returncode != 0:
        raise ToolchainError(
            f"compiler {path!r} failed on --version (exit {proc.returncode}); set {var} to a working compiler"
            + (f"\n  output: {output.splitlines()[0]}" if output else "")
        )
    version = output.splitlines()[0].strip() if output else ""
    with _version_lock:
        _versions.setdefault(path, version)
        return _versions[path]


def run_compiler(
    compiler_path: str,
    flags: Sequence[str],
    source_path: str,
    output_path: str,
    *,
    name: str,
    lang: str = "c",
) -> None:
    """Compile ``source_path`` into the shared library ``output_path``.

    Runs ``[compiler, *flags, "-o", output, source, "-lm"]`` (libraries after
    the source, as the linker resolves left to right).  On failure raises
    CompilerError carrying the compiler's output and the kept source path.

    >>> run_compiler("/usr/bin/cc", ["-O2", "-shared", "-fPIC"], "k.c", "libk.so", name="k")  # doctest: +SKIP
    """
    argv = [compiler_path, *flags, "-o", output_path, source_path, "-lm"]
    what = "CUDA compiler" if lang == "cuda" else "C compiler"
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")
    except OSError as exc:
        var = _ENV_VAR.get(lang, "POLYTILE_CC")
        raise ToolchainError(f"cannot run {what} {compiler_path!r} ({exc}); set {var} to a working compiler") from None
    if proc.returncode != 0:
        # gcc/clang report on stderr; nvcc puts some diagnostics on stdout.
        output = "\n".join(part for part in (proc.stderr.strip(), proc.stdout.strip()) if part)
        raise CompilerError(
            f"{what} failed (exit {proc.returncode}) for kernel {name}",
            source_path=source_path,
            output=output or "(no output)",
        )
    if not os.path.exists(output_path) or os.path.getsize(output_path) == 0:
        raise CompilerError(
            f"{what} exited 0 but produced no library for kernel {name} (do the flags include -shared?)",
            source_path=source_path,
            output=proc.stderr.strip(),
        )
