"""Default-schedule steps for memory locality outside the register tiles: vector loops innermost
(:func:`vector_inner`) and tiled transposing copies (:func:`tile_transposes`).

Both are replayable steps without arguments (recorded as ``vector_inner()``, ``tile_transposes()``),
legality-checked like any transformation; a user schedule gets them only when it asks.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import IllegalSchedule, ScheduleError
from ..poly import body as B
from .core import PACK, PARALLEL, REGTILE, SIMD, UNROLL, Schedule, Step, value_span
from .transforms import _loops_in, parallel, reorder, tile, unmark


def unit_or_invariant(e_list, it: str) -> bool:
    """Whether an index (a list of subscript expressions) moves by one element along ``it`` or not at all:
    ``it`` (plus a constant) as the last subscript and nowhere else, or absent.

    >>> i, j = B.Iter("i"), B.Iter("j")
    >>> unit_or_invariant([i, j], "j"), unit_or_invariant([i, j], "k"), unit_or_invariant([j, i], "j")
    (True, True, False)
    """
    uses = [k for k, e in enumerate(e_list) if it in B.iter_names(e)]
    if not uses:
        return True
    return uses == [len(e_list) - 1] and _last_is(e_list, it)


def vector_inner(s: Schedule) -> Schedule:
    """In each Tile reduction whose innermost loop is a reduction loop, move innermost the output loop
    that moves every access by one element (or leaves it): the vector loop gcc needs.

    Program order puts a contraction's reduction loops inside its output loops; a short reduction
    innermost (2x2 max pooling: ``for c: for i < 2: for j < 2: O[..][c] = max(O[..][c], I[..][c])``)
    runs scalar, while the channel loop is unit-stride in every array.  Reordering reduction loops
    with output loops keeps each cell's updates in their order; each step is legality-checked.
    Statements under a register tile (which has its own vector loop) are left alone, as are sums
    along a loop no output loop can replace (a row sum: its output loop strides the rows) and
    statements sharing a loop with another (a fused nest, which the reordering would split).  An output
    loop marked parallel is tiled first: its chunks stay outside the reduction, in parallel
    (:func:`_vector_chunk`), its points go innermost -- unless it is the only output loop and the output
    is small (:data:`PRIVATE_OUTPUT_BYTES`): then the rows run in parallel, each thread reducing into a
    private copy of the output.

    >>> # maxpool S0: n, y, x, c, i, j  ->  n, y, x, i, j, c
    >>> # column min of 64 x 131072: J [parallel], i  ->  J_t [parallel], i, J
    >>> # column min of 4096 x 4096: J [parallel], i  ->  i [parallel, reduction], J
    """
    out = s
    tiled = {m[0] for m in s.marks if m[2] == REGTILE}
    for name, _ in s.stmts:
        st = s.scop.statement(name)
        loops = _loops_in(out, name)
        if st.c_text is not None or not st.is_reduction or name in tiled or len(loops) < 2:
            continue
        dim = loops[-1][0]
        if out.carried([name], dim, out.deps.reduction).is_empty():
            continue  # the innermost loop already moves the cell
        if any(len(out.group(name, d)) > 1 for d, _ in loops):
            continue  # a loop shared with another statement (a fused nest): reordering would split it
        index = st.body.index
        if not index or not isinstance(index[-1], B.Iter):
            continue
        it = index[-1].name
        names = [n for _, n in loops]
        reads = [ld.index for ld in B.loads(st.body.value)]
        if it not in names or not all(unit_or_invariant(list(r), it) for r in reads + [index]):
            continue
        try:
            reds = _rows_in_parallel(out, name, it, names)
            if reds:
                # Whole rows per thread, each with a private copy of the (small) output: every thread reads
                # its part of the operands as one contiguous stream (column sums, x @ A).
                t = unmark(reorder(out, name, [n for n in names if n != it] + [it]), name, it, PARALLEL)
                out = parallel(t, name, reds[0], reduction=True)
            elif any(m[0] == name and m[1] == it and m[2] == PARALLEL for m in out.marks):
                # A parallel loop stays outside the reduction (one region, not one per step of cumsum's
                # k): its chunks run in parallel (the tile loop takes the mark), its points innermost.
                chunk = _vector_chunk(out, name, it)
                if chunk is None:
                    continue  # one chunk: the loop would lose its parallelism for no vector of gain
                t = tile(out, name, {it: chunk})
                names = [n for _, n in _loops_in(t, name)]
                out = reorder(t, name, [n for n in names if n != it] + [it])
            else:
                out = reorder(out, name, [n for n in names if n != it] + [it])
        except (IllegalSchedule, ScheduleError):
            continue
    if out is s:
        return s
    return out.with_(steps=s.steps + (Step.make("vector_inner"),))


#: Output bytes up to which :func:`vector_inner` runs a reduction's rows in parallel, each thread on a private
#: copy of the output (combined after the loop).  ``Y[j] = +(X[i] * A[i, j])`` on the Zen 5 VM
#: (exploratory, medians of 7 interleaved rounds, idle gaps): with chunks of ``j`` in parallel,
#: 131072 x 64 took 3.5 ms, 65536 x 256 2.2, 16384 x 1024 1.75, 4096^2 1.48; rows in parallel 0.58, 1.39,
#: 1.43 and 1.43 (numpy 0.81, 1.97, 1.62, 1.46); at 64 KiB outputs (1024 x 16384) the two tie, and at 512 KiB
#: (64 x 131072) chunks win, 0.48 against 0.67 ms.  Column sums and minima follow the same line.
PRIVATE_OUTPUT_BYTES = 64 << 10
#: Rows a reduction needs before they are split among threads (each thread's share a stream of its own).
MIN_PARALLEL_ROWS = 256


def _rows_in_parallel(s: Schedule, stmt: str, it: str, names) -> Optional[list]:
    """The reduction loops of ``stmt`` (outermost first) when its rows should run in parallel around a
    vector loop ``it``: ``it`` is marked parallel and is the only output loop, the output fits
    :data:`PRIVATE_OUTPUT_BYTES`, and the outermost reduction loop has :data:`MIN_PARALLEL_ROWS`; else None."""
    if not any(m[0] == stmt and m[1] == it and m[2] == PARALLEL for m in s.marks):
        return None
    st = s.scop.statement(stmt)
    out_loops = B.iter_names(*st.body.index)
    reds = [n for n in names if n not in out_loops]
    # Output loops of one point (C[i, j] with one row: x @ W written as a 1 x K matrix) do not count.
    if not reds or [n for n in names if n in out_loops and loop_extent(s, stmt, n) > 1] != [it]:
        return None
    arr = s.scop.array(st.body.array)
    size = int(np.prod(arr.shape or (1,))) * np.dtype(arr.dtype).itemsize
    if size > PRIVATE_OUTPUT_BYTES or loop_extent(s, stmt, reds[0]) < MIN_PARALLEL_ROWS:
        return None
    return reds


def _vector_chunk(s: Schedule, stmt: str, loop: str) -> Optional[int]:
    """Points per parallel chunk of a vector loop :func:`vector_inner` moves inside a reduction: at least
    8 chunks (threads to balance) of whole 16-element vectors, at most 256 elements (1 KiB of floats:
    a row segment the prefetchers stream); None when that is one chunk (16 points or fewer).

    >>> # extent 4096 -> 256 (16 chunks);  1000 -> 128;  64 -> 16;  3 -> None
    """
    extent = loop_extent(s, stmt, loop)
    chunk = max(16, min(256, -(-(-(-extent // 8)) // 16) * 16))
    return chunk if extent > chunk else None


#: Bytes along each side of a transposing copy's tiles: 32 x 32 floats read 32 rows of 128 bytes and
#: write 32 (8 KiB together, in any L1).  Transpose 4096^2 on the Zen 5 VM: 53 ms untiled; 15.6, 14.3,
#: 16.3 and 18.6 ms with tiles of 16, 32, 64 and 128 floats (exploratory, 3 interleaved rounds).
TRANSPOSE_TILE_BYTES = 128


def tile_transposes(s: Schedule) -> Schedule:
    """Tile square the loops of each copy that writes along one loop and reads along another.

    ``O[j][i] = I[i][j]`` in program order writes a row of ``O`` while reading ``I`` down a column:
    every read touches a new cache line (and, past 4 KiB rows, a new page).  With both loops tiled by
    ``TRANSPOSE_TILE_BYTES`` the lines a tile reads are all still in L1 when the tile's next column
    reads them.  Applies to statements that are not reductions, alone in their nest, unmarked but for
    ``parallel``, whose innermost loop the write follows with unit stride and some read strides, that
    read's last subscript being another loop; both loops at least two tiles long.  The parallel mark
    moves to the outer tile loop; each step is legality-checked.

    >>> # transpose S0: j [parallel], i  ->  j_t [parallel], i_t, j, i   (32 x 32 floats)
    """
    out = s
    for name, _ in s.stmts:
        st = s.scop.statement(name)
        loops = _loops_in(out, name)
        if st.c_text is not None or st.is_reduction or len(loops) < 2:
            continue
        if any(len(out.group(name, d)) > 1 for d, _ in loops):
            continue  # a fused nest: tiling one statement would split it
        if any(m[0] == name and m[2] in (REGTILE, SIMD, UNROLL, PACK) for m in out.marks):
            continue
        names = [n for _, n in loops]
        inner = names[-1]
        index = list(st.body.index)
        if not index or not _last_is(index, inner) or not unit_or_invariant(index, inner):
            continue
        across = None
        for ld in B.loads(st.body.value):
            if unit_or_invariant(list(ld.index), inner):
                continue
            r = next((v for v in names[:-1] if _last_is(list(ld.index), v)), None)
            if r is not None:
                across = r
                break
        if across is None:
            continue
        size = max(8, TRANSPOSE_TILE_BYTES // np.dtype(s.scop.array(st.body.array).dtype).itemsize)
        if min(loop_extent(out, name, across), loop_extent(out, name, inner)) < 2 * size:
            continue
        try:
            t = tile(out, name, {across: size, inner: size})
            tiled = [n for _, n in _loops_in(t, name)]
            out = reorder(t, name, [n for n in tiled if n not in (across, inner)] + [across, inner])
        except (IllegalSchedule, ScheduleError):
            continue
    if out is s:
        return s
    return out.with_(steps=s.steps + (Step.make("tile_transposes"),))


def _last_is(index, it: str) -> bool:
    """Whether the last subscript of ``index`` is loop ``it`` (plus a constant)."""
    last = index[-1]
    return (isinstance(last, B.Iter) and last.name == it) or (
        isinstance(last, B.Bin) and last.op in ("+", "-") and isinstance(last.a, B.Iter) and last.a.name == it
        and isinstance(last.b, B.Const))


def loop_extent(s: Schedule, stmt: str, loop: str) -> int:
    """Points of ``stmt``'s loop ``loop`` over the whole run (its time dimension's range; concrete sizes).

    >>> # matmul 64 x 32 @ 32 x 16, program order: loop_extent(s, "S0", "k") == 32
    """
    span = value_span([s.table[stmt].map], s.loop_dim(stmt, loop))
    return 0 if span is None else span[1] - span[0] + 1  # None: the statement never runs (an empty domain)
