"""Stripe/BLIS-style tiling of contractions: the knob space, and the model-driven default.

For a contraction statement with output loops ``O`` and reduction loops ``R``
the blocked schedule is (BLIS's loop nest, generalised)::

    for O_rest            (outer output loops, untiled: n, y, batch...)
      for j_t   (nc)      columns of the output, step nc
        for k_t (kc)      one reduction loop, step kc
          for i_t (mc)    rows, step mc
            for j_t1 (nr) register blocks   (inner="ij": i_t1 outside j_t1, see
              for i_t1 (mr)                  roles.INNER and search._columns_inner)
                for R_rest, k      (all reduction loops)      <- regtile mark
                  for i (mr), j (nr)   accumulators in vector registers

``j`` is the output's unit-stride loop (vectorised), or, where that axis is
shorter than a vector, another output loop that is an operand's unit-stride
axis (``roles._columns``: a channels-first convolution's output channels; the
block then adds each lane to its own cell), ``i`` another output loop.  A :class:`TileConfig` fixes the
sizes, the order of the three cache-tile loops and of the two register-block loops, and the parallel
loop; :func:`apply` turns it into schedule steps (legality-checked like any others).  :func:`candidates` enumerates
configurations that fit the descriptor's caches, and :func:`autotile` picks
the one the cost model predicts fastest.

The package: :mod:`.roles` (a contraction's loops in the nest, :class:`TileConfig`), :mod:`.packing`
(packed panels and operands streamed from memory: what the nest's prediction leaves out) and
:mod:`.search` (the candidates, their ranking, :func:`apply` and :func:`autotile`).
"""
from .packing import (L3_SHARE, PACK_BUDGET, PACK_MIN_REUSE, PREFETCH_STREAMS, RUN_LOSS, PackPlan, operand_seconds,
                      pack_plan, pack_seconds, stream_seconds, streamed_columns)
from .roles import INNER, ORDERS, ROW_EXTENT, Roles, TileConfig, block_loops, blocked_order, roles
from .search import (BALANCE, COLUMNS_INNER_ROWS, DEEP_ENOUGH, NARROW_REDUCTION, TIE, aliased_rows, apply, autotile,
                     balance, candidates, contraction_statements, fuse_epilogues, memory_time, narrow_widths,
                     output_rows_alias, rank, regions, sample, structure_key, zero_per_block)

__all__ = ["L3_SHARE", "PACK_BUDGET", "PACK_MIN_REUSE", "PREFETCH_STREAMS", "RUN_LOSS", "PackPlan", "operand_seconds",
           "pack_plan", "pack_seconds", "stream_seconds", "streamed_columns", "INNER", "ORDERS", "ROW_EXTENT", "Roles",
           "TileConfig", "block_loops", "blocked_order", "roles", "BALANCE", "COLUMNS_INNER_ROWS", "DEEP_ENOUGH",
           "NARROW_REDUCTION", "TIE", "aliased_rows", "apply", "autotile", "balance", "candidates",
           "contraction_statements", "fuse_epilogues", "memory_time", "narrow_widths", "output_rows_alias", "rank",
           "regions", "sample", "structure_key", "zero_per_block"]
