"""Measuring schedules of one program at fixed inputs: compile, check against the oracle, time; the run's counters."""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import interpreter as reference_mod
from .. import kernel as kernel_mod, pipeline
from ..compare import capped_calls, check_output, random_inputs, spread, with_size_values
# Under this name so tests can substitute a fake clock (``_time_runs(call, n)``: the seconds of n calls).
from ..compare import time_calls as _time_runs
from ..errors import PolytileError
from ..scheduling import Step


@dataclass
class TuneStats:
    """Process-wide counters (tests assert that a cache hit measures nothing).

    ``measurements`` counts kernels run and timed (the baseline included),
    ``trials`` the trials logged, ``cache_hits`` the results served from disk.
    """

    measurements: int = 0
    trials: int = 0
    cache_hits: int = 0

    def reset(self) -> None:
        self.measurements = self.trials = self.cache_hits = 0


stats = TuneStats()


def _make_inputs(shapes, dtypes, seed: int, positive: bool) -> List[np.ndarray]:
    """Tune's inputs: the integers of :func:`polytile.compare.random_inputs` (exact, so checks are exact)."""
    return random_inputs(shapes, dtypes, "int", seed, positive)


@dataclass
class _Outcome:
    median_s: Optional[float] = None
    min_s: Optional[float] = None
    ok: Optional[bool] = None
    error: Optional[str] = None
    runs: int = 0
    spec: Any = None


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class _Bench:
    """The program at fixed inputs: the oracle's answer, and measuring of schedules."""

    def __init__(self, program, shapes, dtypes, *, repeat: int, warmup: int, check: bool, cap_s: float,
                 fake_timer: Optional[int] = None, sizes: Optional[Mapping[str, int]] = None):
        self.program = program
        self.sizes = dict(sizes or {})  # the size inputs' values: kernels are specialised on them
        self.fake_timer = fake_timer
        self.shapes = shapes
        self.dtypes = dtypes
        self.repeat = repeat
        self.warmup = warmup
        self.check = check
        self.cap_s = cap_s
        self.oracle_s = 0.0
        self.arrays = with_size_values(program, _make_inputs(shapes, dtypes, 0, positive=False), self.sizes)
        self.expected = None
        if check:
            t0 = time.perf_counter()
            self.expected = self._oracle()
            if any(np.issubdtype(w.dtype, np.floating) and np.isnan(w).any() for w in self.expected):
                # log, sqrt... of signed inputs: use positive ones instead.
                self.arrays = with_size_values(program, _make_inputs(shapes, dtypes, 0, positive=True), self.sizes)
                self.expected = self._oracle()
            self.oracle_s = time.perf_counter() - t0
        self._done: Dict[str, _Outcome] = {}

    def _oracle(self) -> Tuple[np.ndarray, ...]:
        out = reference_mod.run(self.program, *self.arrays)
        return out if isinstance(out, tuple) else (out,)

    def _compare(self, outs) -> Optional[str]:
        # check_output: the `run --check` rule, so every command agrees
        for name, got, want in zip(self.program.outputs, outs, self.expected):
            c = check_output(name, got, want)
            if not c.ok:
                return f"mismatch with the oracle: {name}: {c.detail or f'max_abs_err {c.err:.3g} > {c.tol_text}'}"
        return None

    def measure(self, steps: Sequence[Step]) -> Tuple[_Outcome, bool]:
        """Compile, check and time the schedule ``steps``; (outcome, whether it was reused)."""
        key = json.dumps([s.to_json() for s in steps], sort_keys=True)
        if key in self._done:
            return self._done[key], True
        out = self._measure(steps)
        self._done[key] = out
        return out, False

    def _measure(self, steps: Sequence[Step]) -> _Outcome:
        try:
            kernel = kernel_mod.compile(self.program, schedule=tuple(steps))
            spec = kernel.specialize_shapes(self.shapes, self.dtypes, sizes=self.sizes)
        except PolytileError as e:
            return _Outcome(error=_error_text(e))
        except Exception as e:  # a bug on one candidate must not end the search
            return _Outcome(error=f"internal error: {_error_text(e)}")
        stats.measurements += 1
        t0 = time.perf_counter()
        try:
            outs = pipeline.run_specialization(spec, self.arrays)
        except PolytileError as e:
            return _Outcome(error=_error_text(e), spec=spec)
        first = time.perf_counter() - t0
        outs = outs if isinstance(outs, tuple) else (outs,)
        ok = None
        if self.check:
            problem = self._compare(outs)
            if problem:
                return _Outcome(ok=False, error=problem, spec=spec)
            ok = True
        # The checking call was the first warm-up.  Call the entry point on bound
        # buffers from here on, so the times are the kernel's, not the allocation's.
        if self.fake_timer is not None:  # checked for real, "timed" by a function of the schedule
            t = fake_time(steps, self.fake_timer)
            return _Outcome(t, t, ok, None, self.repeat, spec)
        args = _bind_buffers(spec, self.arrays)
        call = lambda: spec.function(*args)  # noqa: E731
        extra_warmup, runs = capped_calls(first, self.repeat, self.warmup, self.cap_s)
        if not runs:
            return _Outcome(first, first, ok, None, 1, spec)  # too slow to repeat: its one (warm) run
        _time_runs(call, extra_warmup)
        times = spread(_time_runs(call, runs))
        return _Outcome(times.median, times.min, ok, None, runs, spec)


def fake_time(steps: Sequence[Step], seed: int) -> float:
    """The fake timer's seconds for a schedule: 1 to 2 ms, a hash of ``seed`` and the steps.

    Deterministic in every process, so searches run on different executors
    can be compared trial by trial (tests); results with it are cached apart.

    >>> from polytile.scheduling import Step
    >>> fake_time([Step.make("base", kind="original")], 0) == fake_time([Step.make("base", kind="original")], 0)
    True
    """
    text = json.dumps([s.to_json() for s in steps], sort_keys=True)
    digest = hashlib.sha256(f"{int(seed)}:{text}".encode("utf-8")).hexdigest()
    return 1e-3 * (1.0 + int(digest[:8], 16) / 2 ** 32)


def _bind_buffers(spec, arrays) -> List[np.ndarray]:
    """The entry point's arguments: the inputs, then fresh outputs and temporaries (the calling convention)."""
    inputs = iter([np.ascontiguousarray(a) for a in arrays])
    return [next(inputs) if p.kind == "input" else np.empty(p.shape, dtype=p.dtype) for p in spec.source.params]
