"""Figures: comparisons, tuning runs, iteration spaces and rooflines (matplotlib, an optional extra).

    >>> import polytile
    >>> from polytile import plots
    >>> s = polytile.schedule("examples/matmul.tile", dims="M=8,N=8,K=8").tile("C", i=4, j=4)
    >>> fig = plots.iteration_space(s, path=None)      # add path="mm.png" (or .svg, .pdf) to write it

Every function takes plain data -- what :func:`polytile.compare.compare` and
:func:`polytile.tune.tune` return (or the JSON they save), a :class:`~polytile.scheduling.Schedule`,
a hardware descriptor and :class:`KernelPoint` s -- returns the ``matplotlib.figure.Figure`` and,
given ``path``, writes it in the format its suffix names (``.png``, ``.svg``, ``.pdf``):

* :func:`compare_bars` -- median time per candidate, min-max whiskers, speedups (``compare --plot``)
* :func:`tuning_curve` -- best time so far against trials and seconds, the model against the
  measurements (``tune --plot``)
* :func:`iteration_space` -- one statement's instances in execution order, tiles, parallel
  wavefronts, dependences (``polytile draw``); :func:`statement_space` gives the numbers alone
* :func:`roofline` -- the descriptor's ceilings with kernels placed by the cost model
  (:func:`kernel_point`) and measurements (``polytile roofline``)

matplotlib is imported only when a figure is drawn; without it these raise
:class:`~polytile.errors.MatplotlibMissingError` saying ``pip install -e '.[plots]'``.
:func:`require` checks for it up front.  Modules: :mod:`._mpl` (the lazy import and saving),
:mod:`.compare`, :mod:`.tune`, :mod:`.space` (isl, no matplotlib), :mod:`.draw`, :mod:`.roofline`.
"""
from ..errors import MatplotlibMissingError, PlotError
from ._mpl import FORMATS, check_path, require
from .compare import compare_bars
from .draw import draw_space, iteration_space
from .roofline import KernelPoint, kernel_point, kernel_rows, roofline
from .space import MAX_POINTS, Space, default_statement, statement_space
from .tune import tuning_curve

__all__ = ["compare_bars", "tuning_curve", "iteration_space", "draw_space", "statement_space", "Space",
           "default_statement", "roofline", "KernelPoint", "kernel_point", "kernel_rows", "require", "check_path",
           "FORMATS", "MAX_POINTS", "PlotError", "MatplotlibMissingError"]
