"""The autotuner: measure blocked schedules of a program's contractions and keep the fastest.

    >>> r = tune("examples/matmul.tile", dims="M=512,N=512,K=512", budget_s=30)   # doctest: +SKIP
    >>> print(r.table())                                                           # doctest: +SKIP
    >>> k = polytile.compile("examples/matmul.tile", schedule=r.best)              # doctest: +SKIP

The search space is :mod:`polytile.autotile`'s: one :class:`~polytile.autotile.TileConfig`
per contraction statement of the untuned default schedule (program order,
outermost dependence-free loops parallel).  A point of the search is the
tuple of configurations, one per statement.

1. **Model ranking.**  Every statement's ``autotile.candidates`` are ranked by
   the cost model (``cost.predict_config``; until that module exists, by the
   order ``candidates`` returns them in).  Tuples are enumerated in order of
   their summed predicted time; the first ``top_k`` distinct ones are measured,
   the model's favourite first (source ``"model-top-k"``).
2. **Simulated annealing** from the fastest measured point.  A move changes
   one parameter of one statement's configuration: ``mc``/``nc``/``kc`` doubled,
   halved or set to the neighbouring value the candidate list uses; the
   register block ``mr x nr`` to a neighbouring shape that fits the vector
   registers; the order of the three cache-tile loops (any of
   ``autotile.ORDERS``); the parallel loop (any valid one); the register tile
   on or off.  A slower point is accepted with probability
   ``exp(-(t_new - t_cur) / (T * t_cur))``, ``T`` decaying geometrically from
   0.1 to 0.005 over the budget (elapsed time or trials, whichever is further
   along).  When no unmeasured neighbour is found the search restarts from a
   random candidate (source ``"seed"``).  All randomness comes from
   ``numpy.random.default_rng(seed)``: with the same seed and a trial budget,
   the same measurements give the same sequence of configurations.
3. **Measurement.**  Every distinct schedule is compiled
   (``pipeline.compile(program, schedule=...)``), run once on fixed random
   integer-valued inputs (integers in [-4, 4], or [1, 4] when the oracle
   produces NaN on signed ones) and compared with the reference interpreter
   (``polytile.reference``, run once up front; a plain contraction such as
   matmul goes through its einsum path, under a second at 2048^3, the others
   through its enumeration): integer outputs exactly, float
   outputs with the ``run --check`` tolerance (``polytile.compare.check_output``) (``max_abs_err <= rtol *
   max(1, max|ref|)``, rtol 1e-4 for float32, 1e-5 for float64; with
   integer-valued inputs any wrong element is off by at least 1, far above
   it).  That run doubles as the first warm-up; after ``warmup - 1`` more,
   ``repeat`` timed calls give the median and minimum.  A kernel whose first
   call already takes longer than the per-trial measuring cap
   (``max(2 s, budget / 20)``) is timed with fewer calls (at least that one).
   A candidate that does not apply or is illegal (``IllegalSchedule``), does not
   compile (``CompilerError``) or mismatches the oracle is logged as a failed
   trial and never chosen.

The baseline is what ``polytile.compile`` would run untuned: its default
schedule for the same hardware descriptor (program order, outermost parallel
loops, blocked by the autotiler), measured in the same run; if no tuned schedule
beats it, that default is the answer.  (Measuring against the untiled program
order instead would overstate every gain.)  Results are cached as JSON under ``<cache_dir>/tune/<key>.json``
(namespace ``tune`` of :mod:`polytile.runtime.json_cache`: written atomically, checked on read); the
key covers the program text, input shapes and dtypes, the hardware descriptor,
the C compiler and flags, the polytile version and the search parameters that
change the answer (seed, max_trials, budget rounded to a second, top_k,
repeat, check).  A cached result is returned without compiling or measuring
anything: the best schedule is rebuilt by replaying its stored steps.

``polytile tune FILE.tile`` is :func:`add_arguments` + :func:`main_tune`.

The modules: :mod:`~polytile.tune.result` (TuneResult, Trial, their JSON and
table), :mod:`~polytile.tune.bench` (measuring and checking one schedule; the
counters), :mod:`~polytile.tune.space` (a statement's configurations and the
moves between them, the model's ranking), :mod:`~polytile.tune.search`
(:func:`tune` and its cache key), :mod:`~polytile.tune.command` (the command).
"""
from .bench import TuneStats, _Bench, _make_inputs, stats
from .command import add_arguments, main_tune, parse_budget
from .result import FORMAT_VERSION, SOURCES, Trial, TuneResult
from .search import DEFAULT_STEPS, TuneInterrupted, cache_path, tune

__all__ = ["Trial", "TuneResult", "TuneStats", "TuneInterrupted", "stats", "tune", "cache_path", "parse_budget",
           "add_arguments", "main_tune", "SOURCES"]
