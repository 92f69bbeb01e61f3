"""The unit of work :func:`polytile.compare.compare` hands its executor: build one legal schedule, run it, check it
against the oracle's outputs and time it, in whichever process runs the task (this one, or a Dask worker).

    >>> from polytile.compare import random_inputs
    >>> A, B = random_inputs([(4, 3), (3, 2)], ["float32", "float32"])
    >>> got = measure_candidate("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }",
    ...                         [(4, 3), (3, 2)], ["float32", "float32"], [{"op": "base", "kind": "original"}],
    ...                         [A, B], (A @ B,), repeat=1, warmup=0)      # doctest: +SKIP
    >>> got["check"], len(got["times"]), got["worker"]                        # doctest: +SKIP
    ('ok', 1, 'in-process')
"""
from __future__ import annotations

from typing import Any, Dict

from .measure import _reason, check_output, time_calls
from .errors import PolytileError


def measure_candidate(program, shapes, dtypes, steps, arrays, refs, repeat: int, warmup: int) -> Dict[str, Any]:
    """Build one legal schedule (``steps`` as JSON), run it on ``arrays``, check it against ``refs`` (None:
    unchecked) and time it, in whichever process runs this (an executor's task).

    The result holds the fields of a :class:`~polytile.compare.Row`:

    ``check`` (ok / MISMATCH / unchecked / error), ``reason``,
    ``max_abs_err``, ``times`` and where it ran: ``worker`` and ``kind``
    (:func:`polytile.hardware.host_fingerprint`).
    """
    from . import kernel as kernel_mod
    from . import pipeline
    from .executor import worker_host
    from .hardware import host_fingerprint
    from .interpreter import constants

    out: Dict[str, Any] = {"check": "-", "reason": "", "max_abs_err": None, "times": [],
                           "worker": worker_host()["worker"], "kind": host_fingerprint()}
    try:
        kernel = kernel_mod.compile(program, schedule=pipeline.schedule_steps(list(steps)))
        # Size inputs' values are in the arrays: the kernel is specialised on them.
        spec = kernel.specialize_shapes(shapes, dtypes, build=True, sizes=constants(kernel.program, arrays))
    except PolytileError as exc:  # a failed build: reported in its row, the others still measured
        out["check"], out["reason"] = "error", _reason(exc)
        return out

    def call():
        got = pipeline.run_specialization(spec, arrays)
        return got if isinstance(got, tuple) else (got,)

    outs = call()
    if refs is not None:
        checks = [check_output(n, g, w) for n, g, w in zip(spec.bound.program.outputs, outs, refs)]
        out["max_abs_err"] = max((c.err for c in checks), default=0.0)
        bad = [c for c in checks if not c.ok]
        out["check"] = "ok" if not bad else "MISMATCH"
        out["reason"] = "; ".join(f"{c.name}: {c.detail or f'max_abs_err {c.err:.3g} > {c.tol_text}'}" for c in bad)
    else:
        out["check"] = "unchecked"
    out["times"] = time_calls(call, repeat, warmup)
    return out


def measure_shared(program, shapes, dtypes, steps, shared, repeat: int, warmup: int) -> Dict[str, Any]:
    """:func:`measure_candidate` with the inputs and the oracle's outputs as one shared pair (``Executor.share``:
    sent to each worker once, not with every task)."""
    arrays, refs = shared
    return measure_candidate(program, shapes, dtypes, steps, arrays, refs, repeat, warmup)
