"""Settings, read from the environment once.

Passes never look at ``os.environ`` themselves: they call :func:`get_config`,
so a run sees one consistent set of settings and tests (or the CLI) can swap
them with :func:`override` without touching the process environment.

Environment variables (an empty value counts as unset):

================================  =============================================
``POLYTILE_CACHE_DIR``            compiled-kernel cache (``~/.cache/polytile``)
``POLYTILE_DEBUG``                0 quiet, 1 stages, 2 IR/schedule after each
                                  stage, 3 also the generated source
``POLYTILE_CC`` / ``CC``          C compiler (else ``cc`` or ``gcc`` on PATH)
``POLYTILE_CFLAGS``               replaces the default C flags (shell-split)
``POLYTILE_NVCC``                 CUDA compiler (else ``nvcc`` on PATH or
                                  ``/usr/local/cuda/bin/nvcc``)
``POLYTILE_NUM_THREADS``          OpenMP threads of every kernel call (unset:
                                  the cores other processes leave idle, see
                                  :mod:`polytile.runtime.threads`;
                                  ``OMP_NUM_THREADS`` leaves it to OpenMP)
``POLYTILE_CACHE_MAX_BYTES``      size bound of the compiled kernels in the
                                  cache: bytes, or with a K/M/G suffix
                                  (default 2G; 0: unbounded).  Past it, the
                                  least recently used are removed after a build
================================  =============================================

A bad value raises :class:`~polytile.errors.ConfigError` naming the variable
and the value (the command line reports it as an environment error, exit 3).
The cache directory must belong to the current user and not be writable by
group or others: see docs/architecture.md ("The cache") for the trust model.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Union

from polytile.errors import ConfigError

#: ``-fno-math-errno``: a kernel's errno is not observable, and without it gcc cannot vectorise a loop
#: that calls libm (codegen/c_expr.LIBMVEC); results are unchanged (sqrt becomes one instruction).
DEFAULT_CFLAGS: tuple[str, ...] = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fPIC", "-shared")
CUDA_FALLBACK_PATH = "/usr/local/cuda/bin/nvcc"
MAX_DEBUG_LEVEL = 3
#: Default bound of the compiled kernels in the cache (a few thousand kernels; they are 20-200 KB each).
DEFAULT_CACHE_MAX_BYTES = 2 << 30


def _default_cache_dir() -> Path:
    return Path("~/.cache/polytile").expanduser()


def _default_cc() -> str:
    for name in ("cc", "gcc"):
        if shutil.which(name):
            return name
    # Nothing on PATH: keep a name anyway so the runtime can report clearly
    # which compiler is missing (and how to set POLYTILE_CC) when it is needed.
    return "cc"


@dataclass(frozen=True)
class Config:
    """Every polytile setting.  Build one with :meth:`from_env` or ``replace``.

    >>> Config.from_env({"POLYTILE_DEBUG": "2", "POLYTILE_CC": "clang"}).debug
    2
    """

    cache_dir: Path = field(default_factory=_default_cache_dir)
    debug: int = 0
    cc: str = field(default_factory=_default_cc)
    cflags: tuple[str, ...] = DEFAULT_CFLAGS
    nvcc: Optional[str] = None
    num_threads: Optional[int] = None
    #: ``OMP_NUM_THREADS`` is set: OpenMP chooses each call's thread count (libgomp reads the variable
    #: once, when it loads, so a process's later changes to it reach neither OpenMP nor polytile).
    omp_num_threads_set: bool = False
    cache_max_bytes: int = DEFAULT_CACHE_MAX_BYTES

    def __post_init__(self) -> None:
        # Accept str paths and lists from callers of replace()/override() so
        # the stored values always have the documented types (the cflags tuple
        # is hashed into cache keys, a Path is joined by the runtime).
        object.__setattr__(self, "cache_dir", Path(self.cache_dir).expanduser())
        object.__setattr__(self, "cflags", tuple(str(f) for f in self.cflags))
        if not isinstance(self.debug, int) or not 0 <= self.debug <= MAX_DEBUG_LEVEL:
            raise ConfigError(f"debug level must be an integer 0..{MAX_DEBUG_LEVEL}, got {self.debug!r}")
        if self.num_threads is not None and (not isinstance(self.num_threads, int) or self.num_threads < 1):
            raise ConfigError(f"num_threads must be a positive integer, got {self.num_threads!r}")
        if not isinstance(self.cache_max_bytes, int) or self.cache_max_bytes < 0:
            raise ConfigError(f"cache_max_bytes must be an integer >= 0, got {self.cache_max_bytes!r}")

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "Config":
        """Read the settings from ``environ`` (default: ``os.environ``).

        >>> Config.from_env({}).cflags[0]
        '-O3'
        """
        env = os.environ if environ is None else environ

        def get(name: str) -> Optional[str]:
            value = env.get(name)
            return value if value is not None and value.strip() != "" else None

        cache_dir = get("POLYTILE_CACHE_DIR")
        debug_text = get("POLYTILE_DEBUG")
        debug = _parse_int("POLYTILE_DEBUG", debug_text, 0, MAX_DEBUG_LEVEL) if debug_text is not None else 0
        cc = get("POLYTILE_CC") or get("CC") or _default_cc()
        cflags_text = get("POLYTILE_CFLAGS")
        if cflags_text is None:
            cflags = DEFAULT_CFLAGS
        else:
            try:
                cflags = tuple(shlex.split(cflags_text))
            except ValueError as exc:  # unbalanced quotes
                raise ConfigError(f"POLYTILE_CFLAGS cannot be split into flags ({exc}): {cflags_text!r}") from None
        nvcc = get("POLYTILE_NVCC") or shutil.which("nvcc")
        if nvcc is None and os.path.exists(CUDA_FALLBACK_PATH):
            nvcc = CUDA_FALLBACK_PATH
        threads_text = get("POLYTILE_NUM_THREADS")
        num_threads = _parse_int("POLYTILE_NUM_THREADS", threads_text, 1, None) if threads_text is not None else None
        max_text = get("POLYTILE_CACHE_MAX_BYTES")
        cache_max = _parse_bytes("POLYTILE_CACHE_MAX_BYTES", max_text) if max_text is not None else None
        return cls(
            cache_dir=Path(cache_dir).expanduser() if cache_dir else _default_cache_dir(),
            debug=debug,
            cc=cc,
            cflags=cflags,
            nvcc=nvcc,
            num_threads=num_threads,
            omp_num_threads_set=get("OMP_NUM_THREADS") is not None,
            cache_max_bytes=DEFAULT_CACHE_MAX_BYTES if cache_max is None else cache_max,
        )


def _parse_int(name: str, text: str, low: int, high: Optional[int]) -> int:
    expected = f"an integer {low}..{high}" if high is not None else f"an integer >= {low}"
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"{name} must be {expected}, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise ConfigError(f"{name} must be {expected}, got {text!r}")
    return value


def _parse_bytes(name: str, text: str) -> int:
    """``"1500"``, ``"64K"``, ``"512M"``, ``"2G"`` (powers of 1024) -> bytes.

    >>> _parse_bytes("X", "2G"), _parse_bytes("X", " 64k ")
    (2147483648, 65536)
    """
    t = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    if not digits.isdigit():
        raise ConfigError(f"{name} must be a number of bytes, optionally with a K, M or G suffix, got {text!r}")
    return int(digits) * scale


_lock = threading.Lock()
_current: Optional[Config] = None


def get_config() -> Config:
    """The process-wide settings, read from ``os.environ`` on first use.

    >>> get_config().debug in (0, 1, 2, 3)
    True
    """
    global _current
    cfg = _current
    if cfg is None:
        with _lock:
            if _current is None:
                _current = Config.from_env()
            cfg = _current
    return cfg


def set_config(cfg: Config) -> None:
    """Replace the process-wide settings (the CLI does this after parsing options).

    >>> set_config(dataclasses.replace(get_config(), debug=0))
    """
    global _current
    if not isinstance(cfg, Config):
        raise TypeError(f"set_config expects a Config, got {type(cfg).__name__}")
    with _lock:
        _current = cfg


@contextlib.contextmanager
def override(**changes) -> Iterator[Config]:
    """Temporarily change some settings; the previous ones come back on exit.

    >>> with override(debug=1) as cfg:
    ...     cfg.debug
    1
    """
    previous = get_config()
    cfg = dataclasses.replace(previous, **changes)
    set_config(cfg)
    try:
        yield cfg
    finally:
        set_config(previous)


def debug_log(level: int, stage: str, text: Union[str, Callable[[], str]]) -> None:
    """Print ``text`` to stderr when the debug level is at least ``level``.

    ``text`` may be a zero-argument callable so costly dumps (IR, schedules)
    are only rendered when they will be shown.

    >>> with override(debug=1):
    ...     debug_log(1, "parse", "3 statements")   # stderr: [polytile:parse] 3 statements
    """
    if get_config().debug < level:
        return
    message = text() if callable(text) else text
    print(f"[polytile:{stage}] {message}", file=sys.stderr, flush=True)
