"""The unit of work a tuning run hands to its executor: :func:`measure_trial` compiles, checks and times one
schedule in whichever process runs it (this one, or a Dask worker) and says which machine that was.

A worker keeps the measuring harness of the last few tuning runs
(:class:`~polytile.tune.bench._Bench`: the inputs and the oracle's answer,
computed by the worker's own reference interpreter on its first trial of a
run), keyed by the run's ``session``, so the oracle runs once per worker and
run, not once per trial.

    >>> job = job_spec("function (A[M], B[M]) -> (C) { C[i : M] = +(A[i] * B[i]); }",
    ...                [(8,), (8,)], ["float32", "float32"], repeat=1, warmup=0, check=True, cap_s=2.0)
    >>> r = measure_trial(job, [{"op": "base", "kind": "original"}])      # doctest: +SKIP
    >>> r["ok"], r["error"], r["worker"]["worker"], len(r["kind"])         # doctest: +SKIP
    (True, None, 'in-process', 16)
"""
from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from .. import pipeline
from ..config import override
from ..executor import worker_host
from ..hardware import host_fingerprint
from .bench import _Bench, _error_text

#: Harnesses kept per process: the running tuning run's, and one before it (two runs may overlap on a worker).
KEEP_SESSIONS = 2

_benches: "OrderedDict[str, _Bench]" = OrderedDict()
_lock = threading.Lock()


def job_spec(program_text: str, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], *, repeat: int,
             warmup: int, check: bool, cap_s: float, threads: Optional[int] = None,
             fake_timer: Optional[int] = None, sizes: Optional[Mapping[str, int]] = None) -> Dict[str, Any]:
    """What every trial of one tuning run shares, as plain data sent with each task (a new ``session``);
    ``sizes`` are the values of the program's size inputs."""
    return {"session": uuid.uuid4().hex, "program": str(program_text), "shapes": [list(s) for s in shapes],
            "dtypes": list(dtypes), "repeat": int(repeat), "warmup": int(warmup), "check": bool(check),
            "cap_s": float(cap_s), "threads": threads, "fake_timer": fake_timer,
            "sizes": {str(k): int(v) for k, v in (sizes or {}).items()}}


def _bench_for(job: Mapping[str, Any]) -> Tuple[_Bench, float]:
    """This process's harness of ``job``'s run, made (oracle included) on first use; (harness, seconds it took)."""
    with _lock:
        bench = _benches.get(job["session"])
        if bench is not None:
            _benches.move_to_end(job["session"])
            return bench, 0.0
        program = pipeline.load_program(job["program"])
        bench = _Bench(program, [tuple(s) for s in job["shapes"]], tuple(job["dtypes"]), repeat=job["repeat"],
                       warmup=job["warmup"], check=job["check"], cap_s=job["cap_s"], fake_timer=job["fake_timer"],
                       sizes=job.get("sizes"))
        _benches[job["session"]] = bench
        while len(_benches) > KEEP_SESSIONS:
            _benches.popitem(last=False)
        return bench, bench.oracle_s


def measure_trial(job: Mapping[str, Any], steps_json: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Compile the schedule ``steps_json`` of ``job``'s program, check it against the oracle, time it.

    Returns the trial's record as plain data: ``median_s``, ``min_s``,
    ``ok``, ``error``, ``runs``, ``reused`` (the same schedule was measured
    before in this process), ``oracle_s`` (the oracle's time, when this call
    made the harness), ``worker`` (name, host, pid), ``kind`` (the hardware
    fingerprint of the machine that timed it) and ``seconds`` (the whole
    call).  Never raises for a bad schedule: the reason is in ``error``.
    """
    t0 = time.perf_counter()
    out: Dict[str, Any] = {"median_s": None, "min_s": None, "ok": None, "error": None, "runs": 0,
                           "reused": False, "oracle_s": 0.0}
    try:
        bench, out["oracle_s"] = _bench_for(job)
        steps = pipeline.schedule_steps(list(steps_json))
        # A local worker's kernels get their share of the cores (the executor's threads_per_kernel).
        pin = override(num_threads=int(job["threads"])) if job.get("threads") else contextlib.nullcontext()
        with pin:
            outcome, reused = bench.measure(steps)
    except Exception as e:  # the harness itself failed here (oracle, parse): this trial fails, the run goes on
        out["error"] = f"internal error: {_error_text(e)}"
    else:
        out.update(median_s=outcome.median_s, min_s=outcome.min_s, ok=outcome.ok, error=outcome.error,
                   runs=outcome.runs, reused=reused)
    out["worker"] = worker_host()
    out["kind"] = host_fingerprint()
    out["seconds"] = time.perf_counter() - t0
    return out
