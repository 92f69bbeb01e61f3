"""Source-to-source optimisation of C SCoPs (what Pluto's ``polycc`` does, on polytile's machinery).

For every ``#pragma scop`` region of a C file:

1. extract it (:mod:`polytile.frontends.c`) and compute its dependences; a
   statement that reads, along a loop, a cell it rewrites at one point of
   that loop is split there (index-set splitting, :func:`split_index_sets`;
   the pieces are checked to partition its domain, so no instance is lost
   or repeated) when that makes its hot loops vectorisable;
2. schedule it with isl's scheduler (Pluto-style skews make bands
   permutable, so stencils with a time loop become tileable), or keep the
   original order if the scheduler fails; with smart fusion, isl's unfused
   schedule and the original order compete (:func:`stride_penalty`);
3. tile the outermost band of consecutive loops of every statement group,
   with sizes chosen from the hardware descriptor (a tile's footprint fits
   half of L2; time-tiled bands get a long vector tile innermost); a tiling
   the dependences forbid is retried with one loop fewer, so an illegal
   tiling is never emitted;
4. mark the outermost parallel loop; when a tiled band has no parallel tile
   loop (a time-tiled stencil), skew its outer tile loop by the next one
   (a wavefront) so that the next tile loop becomes parallel;
5. order the statements of shared innermost loops so carried dependences
   run forward, give each its own innermost loop where legal, and mark the
   innermost unit-stride loop of each statement ``simd`` where no
   dependence forbids it;
6. generate the region's loops (:func:`polytile.codegen.c.generate_region`,
   innermost loops separated so they carry no guards) and splice them into
   the file: every byte outside the regions is kept.

Every transformation goes through :mod:`polytile.scheduling`, which checks it
against the dependences; the final schedule is checked once more.

Results are kept in the cache (:mod:`.result_cache`): optimising the same
input with the same options again returns the kept text and notes.

Modules: :mod:`.file` (a whole file: :func:`optimize_c`,
:func:`optimize_regions`), :mod:`.region` (one region: candidates to code,
:func:`optimize_region`), :mod:`.strategy` (versions and candidate schedules,
scored), :mod:`.index_sets` (index-set splitting), :mod:`.tiling` (tile sizes
and band tiling), :mod:`.marks` (parallel and simd marks),
:mod:`.loop_facts` (what the passes ask about loops), :mod:`.result_cache`.

>>> # text = optimize_c("jacobi-2d.c")            # the optimised file as a string
>>> # text = optimize_c("gemm.c", tile=False)     # isl's schedule and parallel marks only
"""

from __future__ import annotations

from .file import optimize_c, optimize_regions
from .index_sets import split_index_sets
from .loop_facts import unit_stride_dim, vectorisable
from .marks import distribute_innermost, parallelise, vector_order, vectorise
from .region import RegionResult, optimize_region, separate_innermost
from .strategy import in_order, serial_penalty, simd_penalty, stride_penalty
from .tiling import tile_bands, tile_sizes

__all__ = [
    "optimize_c", "optimize_regions", "optimize_region", "RegionResult", "split_index_sets", "in_order",
    "tile_bands", "tile_sizes", "parallelise", "vector_order", "distribute_innermost", "vectorise",
    "separate_innermost", "stride_penalty", "serial_penalty", "simd_penalty", "unit_stride_dim", "vectorisable",
]
