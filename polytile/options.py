"""Compilation options: one frozen record, validated when made, part of every cache key.

Importing this module imports neither islpy nor the pipeline: the specialization cache's hit path
(:mod:`polytile.kernel`) builds and hashes options without them.  The scheduling package is
imported only to check a ``fusion`` choice or read ``schedule`` steps, when they are given.

    >>> Options.make("openmp", parallel=False).parallel
    False
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from .errors import OptionError, UnknownOptionError
from .targets import NAMES as TARGETS


@dataclass(frozen=True)
class Options:
    """Compilation options (frozen; part of every cache key).

    ``schedule`` is a tuple of :class:`~polytile.schedule.Step` replayed on
    every specialisation (so one schedule serves all shapes); ``fusion``
    asks isl's scheduler for the base schedule instead of program order.
    """

    target: str = "openmp"
    parallel: bool = True
    cflags: Optional[Tuple[str, ...]] = None
    schedule: Optional[Tuple[Any, ...]] = None  # scheduling.Step
    fusion: Optional[str] = None
    # Descriptor (object, preset name or file) guiding autotile; None: no autotile.
    hardware: Optional[Union[str, Any]] = "host"  # Any: a hardware.CPUDescriptor or GPUDescriptor
    # Statement instances one execution of a parallel loop must run to keep its parallel region
    # (None: the cost model's, cost.parallel_work.min_parallel_work; 0: keep every parallel loop).
    min_parallel_work: Optional[int] = None

    @classmethod
    def make(cls, target: str = "openmp", **kw) -> "Options":
        """Checked options: unknown names, targets, fusion choices and descriptors fail here, early.

        >>> Options.make("openmp", fusion="smart").fusion
        'smart'
        """
        if target not in TARGETS:
            raise OptionError(f"unknown target {target!r}; available: {', '.join(TARGETS)}")
        unknown = set(kw) - {"parallel", "cflags", "schedule", "fusion", "hardware", "min_parallel_work"}
        if unknown:
            raise UnknownOptionError(f"unknown compile option(s): {', '.join(sorted(unknown))}")
        if kw.get("cflags") is not None:
            kw["cflags"] = tuple(kw["cflags"])
        if kw.get("schedule") is not None:
            from .scheduling.saved import schedule_steps

            kw["schedule"] = schedule_steps(kw["schedule"])
        if kw.get("hardware") is not None:
            hw = kw["hardware"]
            # A descriptor object stays one (frozen, so it hashes into cache keys); a name or a
            # path is loaded now to fail early on a typo.
            kw["hardware"] = hw if not isinstance(hw, (str, os.PathLike)) else os.fspath(hw)
            load_hardware(kw["hardware"])
        if kw.get("fusion") is not None:
            from .scheduling import FUSION

            if kw["fusion"] not in FUSION:
                raise OptionError(f"unknown fusion choice {kw['fusion']!r}; use one of {', '.join(FUSION)}")
        if kw.get("parallel") is not None and type(kw["parallel"]).__name__ not in ("bool", "bool_"):
            # parallel="no" is a true value: say so rather than parallelise what the caller meant not to
            raise OptionError(f"parallel must be True or False, got {kw['parallel']!r}")
        work = kw.get("min_parallel_work")
        if work is not None and (isinstance(work, bool) or not isinstance(work, int) or work < 0):
            raise OptionError(f"min_parallel_work must be an integer >= 0, got {work!r}")
        return cls(target=target, **kw)

    def fingerprint(self) -> dict:
        """Everything in the options that decides the generated code, as JSON-able data (the descriptor
        by its contents, not its name: ``host`` on another machine is another descriptor).

        >>> Options.make("openmp", hardware=None).fingerprint()["hardware"] is None
        True
        """
        from .hardware import to_dict

        return {"target": self.target, "parallel": self.parallel,
                "cflags": list(self.cflags) if self.cflags is not None else None,
                "schedule": [s.to_json() for s in self.schedule] if self.schedule is not None else None,
                "fusion": self.fusion, "min_parallel_work": self.min_parallel_work,
                "hardware": to_dict(load_hardware(self.hardware)) if self.hardware is not None else None}


def load_hardware(name):
    """A hardware descriptor by preset name or file, loaded once per process (an object as is).

    >>> load_hardware("x86-avx2").simd_width_bits
    256
    """
    from . import hardware

    return hardware.load_once(name)
