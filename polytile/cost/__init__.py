"""The polyhedral cost model: predicted run time of a schedule on a hardware descriptor.

Pure functions of (schedule, descriptor); nothing is compiled or measured
here.  A roofline over each loop nest, ``time = max(compute_s, max_X
traffic[X] / bandwidth(X))``: traffic per memory level from isl footprints
of the nest's tiles, compute rate from the kind of code the schedule gets.
Design (footprints, traffic, compute, calibration): docs/cost-model.md.

Modules: :mod:`~polytile.cost.constants` (the calibrated constants),
:mod:`~polytile.cost.footprints` (footprints and cache sets with isl),
:mod:`~polytile.cost.roofline` (compute time and traffic per level;
:class:`Prediction`), :mod:`~polytile.cost.nest` (a statement's loop nest
read from a schedule), :mod:`~polytile.cost.predictions`
(:func:`predict_config`, :func:`predict`), :mod:`~polytile.cost.ranking`
(:func:`spearman`).
"""
from .constants import (EFF_REDUCTION, EFF_SCALAR, EFF_VECTOR, EXACT_CELLS, FIT, FMA_LATENCY, KERNEL_EFF,
                        LOAD_PORTS, OMP_REGION_S, OPERAND_FEED, PAGE_BYTES, PLAIN_VECTOR_BYTES, VECTOR_CHAINS,
                        VECTOR_STARTUP)
# Also imported from here: ops_per_instance (by the GPU model, .gpu), _regtile_fraction (autotile), _box_sets (tests).
from .footprints import _box_sets, footprint, ops_per_instance
from .nest import _regtile_fraction
from .predictions import config_bound, predict, predict_config
from .ranking import spearman
from .roofline import Prediction

__all__ = ["Prediction", "footprint", "config_bound", "predict_config", "predict", "spearman",
           "EXACT_CELLS", "FIT", "KERNEL_EFF", "EFF_VECTOR", "EFF_REDUCTION", "EFF_SCALAR",
           "FMA_LATENCY", "LOAD_PORTS", "OPERAND_FEED", "OMP_REGION_S", "VECTOR_STARTUP", "VECTOR_CHAINS",
           "PLAIN_VECTOR_BYTES", "PAGE_BYTES"]
