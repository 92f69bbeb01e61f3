"""The polyhedral cost model: predicted run time of a schedule on a hardware descriptor.

Pure functions of (schedule, descriptor); nothing is compiled or measured
here.  The model is a roofline over a loop nest: the predicted time is the
slowest of the arithmetic and the data movement between each pair of
adjacent memory levels,

    time = max(compute_s, max_X traffic[X] / bandwidth(X))

Notation.  A statement ``S`` has the domain ``D = { S[x] : ... }`` and, for
every array ``a`` it touches, the access relation ``acc_a = { S[x] -> a[f(x)] }``
(loads and the store, unioned).  Its schedule is a 2d+1 time map
``θ = { S[x] -> [t0, ..., t(n-1)] }``; its loops are the named α dimensions
``ℓ = 0 .. L-1``, outermost first.

Tiles and footprints
--------------------
The *tile at depth ℓ* is one iteration of the loops outside ``ℓ``: the
instances sharing a time prefix ``p``::

    T_ℓ(p) = { S[x] ∈ D : θ(x)[0 .. dim(ℓ)) = p }          (T_0 = D, T_L = one instance)

and the footprint of ``a`` over it is the size of the image ``acc_a(T_ℓ(p))``::

    F_a(ℓ) = | { a[c] : ∃ x ∈ T_ℓ(p) : S[x] -> a[c] ∈ acc_a } |   (elements, times the item size)

:func:`footprint` computes it for boxes ``{ S[x] : lo <= x < lo + size } ∩ D``.
Counting: when the image's bounding box holds at most :data:`EXACT_CELLS`
cells the image is counted exactly with isl's ``Set.count_val`` (which
enumerates points: ~3 ns per point, 0.4 s for 512^3, so it is not used for
big sets); bigger images are measured by their box hull, per dimension
``(max - min) / stride + 1`` from ``dim_min_val``/``dim_max_val``/``get_stride``
(exact for images of boxes under the affine, strided and floor-divided
indices of Tile; never more than the number of instances in the box).
islpy's ``FixedBox`` (``get_range_simple_fixed_box_hull``) has no accessors
in the islpy this project uses, hence the per-dimension bounds.  Cache
traffic counts whole lines: the last index of ``a`` is grouped into lines of
``line_bytes / itemsize`` elements (``a[.., c] -> a_line[.., floor(c / e)]``),
so a strided or transposed access costs a line per element.

:func:`predict` takes ``p`` as the time prefix of a central instance of
``D`` (an interior tile, full also where the last tile is partial) and
builds ``T_ℓ(p)`` with isl from θ.  :func:`predict_config` knows the blocked
nest of a :class:`~polytile.autotile.TileConfig` (register block ``mr x nr``
over ``k``; ``mc x kc`` A-panel; ``kc x nc`` B-panel; the whole problem), so
its tiles are boxes at the domain's origin and the footprints are cached
per (statement, box sizes): ranking hundreds of configurations costs a few
ms each.

Trip counts are ratios of instance counts, ``trips(ℓ) = |T_ℓ| / |T_(ℓ+1)|``,
so their product is ``|D|`` and a partial last tile counts as the fraction
it is (``E / mc`` iterations of an ``mc``-tile loop over ``E`` points).

Traffic
-------
Level names are the descriptor's.  ``traffic[X]`` is the number of bytes the
level ``X`` delivers to the level inside it -- ``traffic["L1"]`` is what the
registers load from (and store to) L1, ``traffic["L2"]`` the fills of L1,
..., ``traffic["DRAM"]`` the fills of the last cache -- and it is served at
X's bandwidth: ``level_time_s[X] = traffic[X] / bandwidth(X)`` (whole
machine; a per-core level with fewer busy threads than cores delivers its
per-core bandwidth times the busy threads).

*Caches* (LRU).  Level ``Y`` (the one inside ``X``) holds ``C_Y`` bytes per
thread: its size for a per-core level, size / threads for a shared one.
``d*`` is the outermost depth whose tile fits, ``Σ_a F_a(d*) <= FIT * C_Y``.
Between consecutive iterations of loop ``d* - 1`` the reuse distance is one
tile at ``d*``, which fits, so what consecutive iterations share stays
resident; further out it does not.  Each execution of loop ``d* - 1``
therefore loads its whole footprint once::

    traffic_a = F_a(d* - 1) * Π_{e < d*-1} trips(e)         (d* = 0: F_a(0), compulsory)

with footprints in lines.  The written array counts twice (the line comes
in and is written back).

*Set conflicts.*  A cache whose sets span at most a page
(``sets * line <= PAGE_BYTES``: the virtually indexed L1) maps an address
to a set by its page offset, so arrays (page-aligned, as large numpy
arrays are) conflict predictably: rows a power of two apart land in few
sets.  For such a level the lines of each array in the tile are mapped
through ``{ a[c] -> set[floor(addr(c) / line) mod sets] }`` (``addr`` the
row-major byte offset) and counted; the tile fits only if every array also
has ``lines_a <= FIT * sets_a * ways``.  (A 64 x 16 panel of a 512-wide
float matrix is 4 KiB but uses 2 of L1's 64 sets: it cannot stay.)

*Registers* are not LRU: they keep what the code generator keeps there.  A
``regtile`` mark holds the ``mr x nr`` accumulator block across the reduction
loops, so the register tile is the block (``d* = L - 2``); plain code holds
one instance (``d* = L``), the values the innermost loop does not change
being hoisted out of it.  A register tile is reloaded for every iteration
of the enclosing loops out to the innermost loop ``e_a`` it depends on
(``F_a(e_a) > F_a(e_a + 1)``)::

    traffic_a = F_a(d*) * Π_{e <= e_a} trips(e)              (elements, not lines)

Compute
-------
``flops = ops * |D|`` where ``ops`` counts the arithmetic of the body and the
reduction (2 for a multiply-add contraction).  ``|D|`` is the product of the
extents when ``D`` equals its bounding box (checked with isl), else isl's
``count_val``.  Each part of the instances runs at
``peak(dtype) / cores * speedup * efficiency``:

* ``speedup``: the parallel loop (a ``parallel`` mark) with ``T`` iterations
  runs on ``P = min(cores, ⌈T⌉)`` threads, statically scheduled; the
  busiest gets ``min(⌈⌈T⌉ / P⌉, T)`` iterations' work (a partial last
  iteration is only its own when it is alone), so
  ``speedup = T / min(⌈⌈T⌉ / P⌉, T)`` (one iteration: no speedup; isl does
  not even emit the loop).  Each entry into a parallel region costs
  :data:`OMP_REGION_S`.  Per-thread traffic uses one thread's share of the
  parallel loop.
* ``efficiency`` by the code the schedule gets (``V``: SIMD lanes; ``v``:
  lanes of gcc's auto-vectorised code, at most :data:`PLAIN_VECTOR_BYTES`):

  - full ``mr x nr`` blocks of a ``regtile`` mark: per reduction step the
    micro-kernel issues ``mr * nr/V`` FMAs on ``fma_units`` pipes and
    ``nr/V + mr`` loads on :data:`LOAD_PORTS` ports, and each accumulator
    waits :data:`FMA_LATENCY` cycles for its previous FMA::

        eff = KERNEL_EFF * (mr nr/V / fma_units) / max(mr nr/V / fma_units, (nr/V + mr) / LOAD_PORTS, FMA_LATENCY)

    The partial blocks at the edges (fractions from the tile and block sizes)
    run the plain loops below, with their own (shorter) innermost loops;
  - plain loops whose innermost loop is unit-stride (or invariant) in every
    access and free of dependences (gcc vectorises it): ``T`` iterations are
    ``T/v`` vectors; the innermost reduction loop around it advances ``c``
    independent vector accumulations per step (``c = F_w(e+1) / v`` for the
    written array ``w``)::

        eff = EFF_VECTOR * (T/v) / (T/v + VECTOR_STARTUP) * min(1, c / VECTOR_CHAINS)

    gcc -O3 also interchanges an innermost reduction loop with the output
    loop around it when that loop is unit-stride (matmul's ijk becomes ikj),
    which the model follows;
  - innermost loop carrying a reduction: one dependent chain,
    ``EFF_REDUCTION / (V * fma_units)``;
  - otherwise (strided, or a single vector or less): ``EFF_SCALAR / V``.

Calibration
-----------
``python benchmarks/bench_model.py --calibrate`` times (one thread, best of
9 calls, matmul 512^3 and conv2d 1x56x56x64 -> 64, 3x3) one schedule per kind
of code and prints its measured fraction of one core's peak next to the
model's; the constants were set from those runs and from the one-thread
benchmark tables on the development machine (2-core Sapphire Rapids VM
under KVM, 166 GFLOP/s fp32 per core at the nominal 2.6 GHz, gcc 12.2 -O3
-march=native -fopenmp, parallel bodies outlined into restrict functions):

* register kernels 0.45 (4x16, latency-bound) .. 0.75 (8x32, 14x32) of
  peak on matmul, up to 1.0 on conv (6x64; turbo lifts the clock above the
  nominal one): ``KERNEL_EFF = 0.9`` with 2 load ports and a 4-cycle FMA
  latency (the x86 figures since Haswell/Zen);
* vectorised plain loops: conv's co loops of 64 floats 0.34, matmul's j
  loops of 32 0.2..0.3, loops of 16 floats (two 8-float vectors) 0.09..0.14,
  matmul ikj (a j loop of 512, L1-bound on its loads and stores) 0.18:
  ``EFF_VECTOR = 0.4``, ``VECTOR_STARTUP = 3``, ``VECTOR_CHAINS = 8``
  (store-to-load forwarding plus the FMA latency, ~10 cycles);
* conv in program order (ci innermost, a reduction gcc cannot interchange):
  1.5 GFLOP/s, 0.009 of peak: ``EFF_REDUCTION = 0.3``;
* libgomp's fork/join: a few microseconds (``OMP_REGION_S``).

The compiler's choices move these numbers (the outlining of parallel bodies
doubled the plain loops' rates), so recalibrate after code generation changes.

Ranking quality is measured by ``benchmarks/bench_model.py`` (Spearman's
rank correlation of predicted and measured times over ~48 schedules each
of matmul and conv2d).

The modules: :mod:`~polytile.cost.constants` (the calibrated constants),
:mod:`~polytile.cost.footprints` (what the model knows of a statement;
counting the footprints and cache sets of instance sets with isl),
:mod:`~polytile.cost.roofline` (the nest the model evaluates, its compute
time and traffic per memory level; :class:`Prediction`),
:mod:`~polytile.cost.nest` (a statement's loop nest read from a schedule's
time maps and marks, and how gcc compiles its innermost loop),
:mod:`~polytile.cost.predictions` (:func:`predict_config` and :func:`predict`),
:mod:`~polytile.cost.ranking` (:func:`spearman`).
"""
from .constants import (EFF_REDUCTION, EFF_SCALAR, EFF_VECTOR, EXACT_CELLS, FIT, FMA_LATENCY, KERNEL_EFF,
                        LOAD_PORTS, OMP_REGION_S, PAGE_BYTES, PLAIN_VECTOR_BYTES, VECTOR_CHAINS, VECTOR_STARTUP)
# Also imported from here: ops_per_instance (by gpucost), _regtile_fraction (autotile), _box_sets (tests).
from .footprints import _box_sets, footprint, ops_per_instance
from .nest import _regtile_fraction
from .predictions import predict, predict_config
from .ranking import spearman
from .roofline import Prediction

__all__ = ["Prediction", "footprint", "predict_config", "predict", "spearman",
           "EXACT_CELLS", "FIT", "KERNEL_EFF", "EFF_VECTOR", "EFF_REDUCTION", "EFF_SCALAR",
           "FMA_LATENCY", "LOAD_PORTS", "OMP_REGION_S", "VECTOR_STARTUP", "VECTOR_CHAINS", "PLAIN_VECTOR_BYTES",
           "PAGE_BYTES"]
