"""Source-to-source optimisation of C SCoPs (what Pluto's ``polycc`` does, on polytile's machinery).

Every ``#pragma scop`` region of a C file is extracted (:mod:`polytile.frontends.c`),
split by index sets where that makes its hot loops vectorisable, scheduled by
isl (or kept in order), tiled with sizes from the hardware descriptor, marked
parallel (a wavefront for time-tiled stencils) and simd, generated with isl's
AST generator and spliced back: every byte outside the regions is kept.  Each
step is checked against the dependences.  Results are kept in the ``opt``
namespace of the cache (:mod:`.result_cache`).  Design (the passes,
reassociation, tile sizes, schedule files, the cache): docs/c-optimiser.md.

Modules: :mod:`.file` (:func:`optimize_c`, :func:`optimize_regions`), :mod:`.region`
(:func:`optimize_region`), :mod:`.strategy` (candidate schedules, scored),
:mod:`.index_sets`, :mod:`.expansion` (scalar temporaries as arrays), :mod:`.tiling`,
:mod:`.register_blocks` (running values of updates held in variables), :mod:`.machine` (the
descriptor's facts the passes use), :mod:`.marks` (parallel and simd marks), :mod:`.loop_facts`
(what the passes ask about loops), :mod:`.result_cache`.

>>> # text = optimize_c("jacobi-2d.c")            # the optimised file as a string
>>> # text = optimize_c("gemm.c", tile=False)     # isl's schedule and parallel marks only
"""

from __future__ import annotations

from .file import optimize_c, optimize_regions
from .expansion import expand_scalars
from .index_sets import split_index_sets
from .loop_facts import unit_stride_dim, vectorisable
from .machine import CMachine, machine
from .marks import distribute_innermost, parallelise, vector_order, vectorise
from .region import RegionResult, optimize_region, separate_innermost
from .register_blocks import block_roles, register_block
from .strategy import in_order, serial_penalty, simd_penalty, stride_penalty
from .tiling import tile_bands, tile_sizes

__all__ = [
    "optimize_c", "optimize_regions", "optimize_region", "RegionResult", "split_index_sets", "expand_scalars",
    "in_order", "CMachine", "machine", "block_roles", "register_block",
    "tile_bands", "tile_sizes", "parallelise", "vector_order", "distribute_innermost", "vectorise",
    "separate_innermost", "stride_penalty", "serial_penalty", "simd_penalty", "unit_stride_dim", "vectorisable",
]
