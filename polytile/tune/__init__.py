"""The autotuner: measure blocked schedules of a program's contractions and keep the fastest.

    >>> r = tune("examples/matmul.tile", dims="M=512,N=512,K=512", budget_s=30)   # doctest: +SKIP
    >>> print(r.table())                                                           # doctest: +SKIP
    >>> k = polytile.compile("examples/matmul.tile", schedule=r.best)              # doctest: +SKIP

A point of the search is one :class:`~polytile.autotile.TileConfig` per
contraction statement.  The cost model's ``top_k`` points are measured first,
then simulated annealing moves around the fastest within the budget; every
candidate is checked against the reference interpreter once, and the answer
is never slower than ``polytile.compile``'s untuned default, measured in the
same run.  Trials run in this process or on Dask workers (``executor=``,
:mod:`polytile.executor`).  Results are cached in the ``tune`` namespace of
:mod:`polytile.runtime.json_cache`.  Design: docs/tuning.md.

Modules: :mod:`~polytile.tune.result` (TuneResult, Trial, their JSON and
table), :mod:`~polytile.tune.bench` (measuring and checking one schedule),
:mod:`~polytile.tune.space` (configurations, moves, the model's ranking),
:mod:`~polytile.tune.search` (:func:`tune` and its cache key),
:mod:`~polytile.tune.remote` (:func:`measure_trial`, the unit of work an executor runs),
:mod:`~polytile.tune.command` (``polytile tune``: :func:`add_arguments`, :func:`main_tune`).
"""
from .bench import TuneStats, _Bench, _make_inputs, stats
from .command import add_arguments, main_tune, parse_budget
from .remote import measure_trial
from .result import FORMAT_VERSION, SOURCES, Trial, TuneResult
from .search import DEFAULT_STEPS, TuneInterrupted, cache_path, partial_path, tune

__all__ = ["Trial", "TuneResult", "TuneStats", "TuneInterrupted", "stats", "tune", "cache_path", "partial_path",
           "parse_budget", "add_arguments", "main_tune", "SOURCES", "measure_trial"]
