"""Where measurements run: in this process (the default), or on the workers of a Dask cluster.

``polytile tune`` and ``polytile compare`` hand each unit of work (compile,
check and time one schedule) to an :class:`Executor`:

* :class:`InProcess` -- the default and no new dependency: every task runs
  here, one after the other, when its result is asked for (as before
  executors existed);
* :class:`DaskExecutor` -- ``local:N`` starts N worker processes on this
  machine (a ``distributed.LocalCluster``), an address (``tcp://HOST:PORT``)
  connects to a running ``dask scheduler`` and its ``dask worker`` s.  Dask is
  the optional extra ``pip install -e '.[distributed]'``, imported only here
  and only when asked for.

Timing stays honest on a cluster: local workers run one task at a time
(``nthreads=1``, and every task asks for the worker's single ``timer``
resource), and each kernel gets its share of the machine's cores
(:attr:`DaskExecutor.threads_per_kernel`); a cluster whose workers would time
two kernels at once on shared cores is reported in :meth:`Executor.describe`.

    >>> ex = executor_from()                          # in-process
    >>> futures = [ex.submit(pow, 2, k) for k in range(3)]
    >>> [f.result() for f in ex.as_completed(futures)]
    [1, 2, 4]
    >>> ex.describe()["executor"], ex.workers
    ('in-process', 1)
"""
from __future__ import annotations

import logging
import os
import re
import socket
import sys
import warnings
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

from .errors import PolytileError

#: How to install what DaskExecutor needs (said by every error about it).
INSTALL_HINT = "pip install -e '.[distributed]'  (or: pip install 'dask[distributed]')"
#: The worker resource a timed task holds, so no worker times two kernels at once.
TIMER_RESOURCE = "timer"

_LOCAL = re.compile(r"^\s*local\s*:\s*(\d+)\s*$", re.IGNORECASE)


class WorkerLost(PolytileError):
    """A task's worker died (more often than Dask retries it on another worker): the task has no result."""


class ExecutorWarning(UserWarning):
    """Timings of this executor may be disturbed (workers sharing cores); the result's provenance says so too."""


class Executor:
    """Runs tasks and hands back their results as they complete.

    ``workers`` is how many tasks run at once (the tuner proposes that many
    schedules per step).  Use as a context manager, or call :meth:`close`.
    """

    workers: int = 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Start ``fn(*args)``; a future with ``result()``, ``done()`` and ``cancel()``."""
        raise NotImplementedError

    def as_completed(self, futures: Iterable[Any]) -> Iterator[Any]:
        """The ``futures`` in the order they complete."""
        raise NotImplementedError

    def cancel(self, futures: Iterable[Any]) -> None:
        """Drop the tasks of ``futures`` that have not finished (Ctrl-C)."""
        for f in futures:
            f.cancel()

    def share(self, value: Any) -> Any:
        """``value`` (large, read-only: input arrays) in a form to pass to :meth:`submit`, sent to workers once."""
        return value

    def worker_kinds(self) -> Dict[str, str]:
        """Worker name -> hardware fingerprint (:func:`polytile.hardware.host_fingerprint`) of its machine."""
        raise NotImplementedError

    def describe(self) -> Dict[str, Any]:
        """What ran the tasks, for a result's provenance: kind, address, workers, threads, notes."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the workers this executor started (a cluster it only connected to stays up)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------
# In this process
# ---------------------------------------------------------------------------


class _Lazy:
    """A task run in this process when its result is first asked for, so Ctrl-C stops between two tasks."""

    def __init__(self, fn: Callable[..., Any], args: tuple):
        self._fn, self._args = fn, args
        self._state = "pending"
        self._value: Any = None

    def result(self) -> Any:
        if self._state == "pending":
            try:
                self._value, self._state = self._fn(*self._args), "finished"
            except Exception as e:  # kept, as a remote task's would be; Ctrl-C goes through
                self._value, self._state = e, "error"
        if self._state == "cancelled":
            raise PolytileError("the task was cancelled")
        if self._state == "error":
            raise self._value
        return self._value

    def done(self) -> bool:
        return self._state != "pending"

    def cancel(self) -> None:
        if self._state == "pending":
            self._state = "cancelled"


class InProcess(Executor):
    """Today's behaviour: every task runs in this process, in the order submitted (see the module doc)."""

    workers = 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> _Lazy:
        return _Lazy(fn, args)

    def as_completed(self, futures: Iterable[Any]) -> Iterator[Any]:
        # In submission order: each runs as the caller asks for its result.
        for f in list(futures):
            if f._state != "cancelled":
                yield f

    def worker_kinds(self) -> Dict[str, str]:
        from .hardware import host_fingerprint

        return {"in-process": host_fingerprint()}

    def describe(self) -> Dict[str, Any]:
        return {"executor": "in-process", "workers": 1, "threads_per_kernel": None, "notes": []}


# ---------------------------------------------------------------------------
# On Dask workers
# ---------------------------------------------------------------------------


def _import_distributed():
    try:
        import distributed
    except ImportError as e:
        raise PolytileError(f"running on Dask workers needs dask.distributed, which is not installed ({e}); "
                            f"install it with: {INSTALL_HINT}") from None
    return distributed


class _DaskFuture:
    """A ``distributed.Future`` whose lost worker is a :class:`WorkerLost`, so callers need not import Dask."""

    def __init__(self, future):
        self.future = future

    def result(self) -> Any:
        distributed = sys.modules["distributed"]
        try:
            return self.future.result()
        except distributed.KilledWorker as e:
            raise WorkerLost(f"worker lost: {e}") from None

    def done(self) -> bool:
        return self.future.done()

    def cancel(self) -> None:
        self.future.cancel()


class DaskExecutor(Executor):
    """Tasks on Dask workers: ``DaskExecutor(n_workers=2)`` starts them here, ``DaskExecutor("tcp://h:8786")``
    connects to a running scheduler, ``DaskExecutor(client=c)`` uses a ``distributed.Client`` the caller owns.

    Local workers are processes with one thread each and one ``timer``
    resource; each kernel they time gets ``os.cpu_count() // n_workers``
    OpenMP threads (at least one: more workers than cores share cores, which
    :meth:`describe` says).  On a remote cluster the kernels take the cores
    their machine leaves idle, as in-process runs do.

        >>> with DaskExecutor(n_workers=2) as ex:                 # doctest: +SKIP
        ...     [f.result() for f in ex.as_completed([ex.submit(abs, -3)])]
        [3]
    """

    def __init__(self, address: Optional[str] = None, *, n_workers: Optional[int] = None, client=None,
                 threads_per_kernel: Optional[int] = None, timeout: float = 20.0):
        distributed = _import_distributed()
        self.cluster = None
        self._owns_client = client is None
        self.notes: List[str] = []
        cores = os.cpu_count() or 1
        if client is not None:
            self.client = client
            mode = "client"
        elif address:
            try:
                self.client = distributed.Client(address, timeout=timeout)
            except (OSError, TimeoutError) as e:
                raise PolytileError(f"cannot reach the Dask scheduler at {address} ({e}); start one with "
                                    f"`dask scheduler` and workers with `dask worker {address} --nthreads 1`") from None
            mode = "scheduler"
        else:
            if not n_workers or n_workers < 1:
                raise PolytileError(f"local workers: expected a positive number, got {n_workers!r}")
            # Quiet: the cluster's own INFO lines would bury the tuner's output.  Its HTTP server on a
            # free loopback port: the default 8787 may be another cluster's (a warning each time).
            self.cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                                    host="127.0.0.1", resources={TIMER_RESOURCE: 1},
                                                    dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
            self.client = distributed.Client(self.cluster)
            mode = "local"
            if threads_per_kernel is None:
                threads_per_kernel = max(1, cores // n_workers)
            if n_workers * threads_per_kernel > cores:
                self._note(f"{n_workers} local workers x {threads_per_kernel} thread(s) per kernel on {cores} cores: "
                           f"kernels timed at the same time share cores, so their times are slower than alone")
        self.mode = mode
        self.threads_per_kernel = threads_per_kernel
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except (OSError, TimeoutError) as e:
            self.close()
            raise PolytileError(f"no Dask worker joined the scheduler at {self.address} within {timeout:g} s ({e}); "
                                f"start one with `dask worker {self.address} --nthreads 1`") from None
        info = self._workers_info()
        self.workers = max(1, len(info))
        have_timer = all(TIMER_RESOURCE in (w.get("resources") or {}) for w in info.values())
        # The timer resource serialises timed tasks on a worker; a worker without it that runs
        # several threads could time two kernels at once on shared cores.
        self._submit_kw: Dict[str, Any] = {"pure": False}
        if have_timer:
            self._submit_kw["resources"] = {TIMER_RESOURCE: 1}
        else:
            busy = sorted(a for a, w in info.items() if int(w.get("nthreads", 1)) > 1)
            if busy:
                self._note(f"worker(s) {', '.join(busy)} run several tasks at once and have no '{TIMER_RESOURCE}' "
                           f"resource: two kernels may be timed together on shared cores (start workers with "
                           f"--nthreads 1, or --resources {TIMER_RESOURCE}=1)")

    def _note(self, text: str) -> None:
        self.notes.append(text)
        warnings.warn(text, ExecutorWarning, stacklevel=3)

    def _workers_info(self) -> Dict[str, Dict[str, Any]]:
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # older distributed: every worker is listed
            info = self.client.scheduler_info()
        return dict(info.get("workers", {}))

    @property
    def address(self) -> str:
        return str(self.client.scheduler.address)

    def submit(self, fn: Callable[..., Any], *args: Any) -> _DaskFuture:
        return _DaskFuture(self.client.submit(fn, *args, **self._submit_kw))

    def as_completed(self, futures: Iterable[Any]) -> Iterator[Any]:
        distributed = sys.modules["distributed"]
        wrapped = list(futures)
        if not wrapped:
            return
        by_key = {f.future.key: f for f in wrapped}
        for done in distributed.as_completed([f.future for f in wrapped]):
            yield by_key[done.key]

    def cancel(self, futures: Iterable[Any]) -> None:
        pending = [f.future for f in futures if not f.done()]
        if pending:
            self.client.cancel(pending)

    def share(self, value: Any) -> Any:
        # Scattered once to every worker, so each task's message holds a reference, not the arrays.
        return self.client.scatter([value], broadcast=True)[0]

    def worker_kinds(self) -> Dict[str, str]:
        from .hardware import host_fingerprint

        return dict(self.client.run(host_fingerprint))

    def describe(self) -> Dict[str, Any]:
        info = self._workers_info()
        return {"executor": "dask", "mode": self.mode, "address": self.address, "workers": len(info),
                "worker_threads": {a: int(w.get("nthreads", 1)) for a, w in sorted(info.items())},
                "threads_per_kernel": self.threads_per_kernel,
                "timer_resource": "resources" in self._submit_kw, "notes": list(self.notes)}

    def close(self) -> None:
        if self._owns_client and getattr(self, "client", None) is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None


# ---------------------------------------------------------------------------
# Choosing one
# ---------------------------------------------------------------------------


def local_workers(text: Union[str, int]) -> int:
    """N from ``"local:N"`` (or N itself).

    >>> local_workers("local:2"), local_workers(3)
    (2, 3)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        n = text
    else:
        m = _LOCAL.match(str(text))
        if not m:
            raise PolytileError(f"bad --workers {text!r}: write local:N (N worker processes on this machine); "
                                f"for a running cluster use --scheduler tcp://HOST:PORT")
        n = int(m.group(1))
    if n < 1:
        raise PolytileError(f"bad --workers {text!r}: at least one worker")
    return n


def executor_from(workers: Union[None, str, int] = None, scheduler: Optional[str] = None, *,
                  threads_per_kernel: Optional[int] = None) -> Executor:
    """The executor for ``--workers local:N`` or ``--scheduler tcp://HOST:PORT``; in-process with neither.

    >>> type(executor_from()).__name__
    'InProcess'
    >>> executor_from("local:2", "tcp://127.0.0.1:8786")
    Traceback (most recent call last):
    ...
    polytile.errors.PolytileError: give --workers or --scheduler, not both
    """
    if workers is not None and scheduler is not None:
        raise PolytileError("give --workers or --scheduler, not both")
    if scheduler is not None:
        if "://" not in scheduler:
            scheduler = f"tcp://{scheduler}"
        return DaskExecutor(scheduler, threads_per_kernel=threads_per_kernel)
    if workers is not None:
        return DaskExecutor(n_workers=local_workers(workers), threads_per_kernel=threads_per_kernel)
    return InProcess()


def as_executor(executor: Union[None, str, Executor]) -> "tuple[Executor, bool]":
    """(executor, whether the caller must close it) for the ``executor=`` argument of tune and compare:
    None (in-process), an :class:`Executor`, ``"local:N"`` or a scheduler address.

    >>> ex, owned = as_executor(None)
    >>> type(ex).__name__, owned
    ('InProcess', True)
    """
    if executor is None:
        return InProcess(), True
    if isinstance(executor, Executor):
        return executor, False
    if isinstance(executor, str):
        if _LOCAL.match(executor):
            return executor_from(workers=executor), True
        return executor_from(scheduler=executor), True
    raise PolytileError(f"executor: expected None, an Executor, 'local:N' or a scheduler address, got {executor!r}")


def current_worker() -> str:
    """Inside a task: the name of the worker running it (its address), or ``"in-process"``."""
    if "distributed" in sys.modules:
        try:
            return str(sys.modules["distributed"].get_worker().address)
        except (ValueError, AttributeError):
            pass
    return "in-process"


def worker_host() -> Dict[str, Any]:
    """Inside a task: the worker's name, host name and process id (recorded with each result)."""
    return {"worker": current_worker(), "host": socket.gethostname(), "pid": os.getpid()}


# ---------------------------------------------------------------------------
# Command-line options (tune and compare)
# ---------------------------------------------------------------------------

EXECUTOR_HELP = """\
distributed (optional extra: pip install -e '.[distributed]'):
  --workers local:2                      two worker processes on this machine
  --scheduler tcp://127.0.0.1:8786       a running `dask scheduler` with its `dask worker`s
"""


def add_arguments(parser) -> None:
    """``--workers local:N`` and ``--scheduler ADDRESS`` on an argparse parser (a group of their own)."""
    g = parser.add_argument_group("distributed (Dask)")
    g.add_argument("--workers", metavar="local:N", default=None,
                   help="run the measurements on N worker processes on this machine (needs the 'distributed' "
                        "extra); each times one kernel at a time on its share of the cores")
    g.add_argument("--scheduler", metavar="tcp://HOST:PORT", default=None,
                   help="run the measurements on a running Dask cluster (`dask scheduler`, then "
                        "`dask worker tcp://HOST:PORT --nthreads 1` on each machine)")


def from_args(args) -> Executor:
    """The executor the parsed ``--workers``/``--scheduler`` options ask for (in-process without them)."""
    return executor_from(getattr(args, "workers", None), getattr(args, "scheduler", None))
