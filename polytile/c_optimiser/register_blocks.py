"""Register blocks for C updates: unroll-and-jam of a tile's row and column loops.

An update ``lhs op= e`` whose cell does not move along some of its loops
(the reduction loops: ``k`` of ``C[i][j] += alpha * A[i][k] * B[k][j]``)
reads and writes its cell once per reduction step when the tile's point loops
run ``(i, k, j)``.  Tiling the row and column point loops again by
``MR x NR`` and running the reduction loops outside them::

    before: i_t, j_t, k_t, i, k, j                      C[i][j] loaded and stored every k
    after:  i_t, j_t, k_t, i_t1, j_t1, k, i, j + regtile mark

lets the code generator (:mod:`polytile.codegen.c_regblock`) keep the
``MR x NR`` running values in variables across the reduction loops.  Every
step is legality-checked; the statement keeps its evaluation order per cell,
so the output stays bitwise identical.
"""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

from ..codegen import c_regblock
from ..poly import body as B
from ..scheduling import Schedule
from ..scheduling import regtile as regtile_step
from ..scheduling import reorder as reorder_step
from ..scheduling import tile as tile_step
from ..scheduling import distribute as distribute_step
from ..scheduling.marks import NO_LOOP, RegTile
from .loop_facts import _REFUSED, _arrays_of, _unit_stride, tile_loop_name, vectorisable
from .machine import CMachine


def block_roles(s: Schedule, name: str) -> Optional[Tuple[str, str, List[str]]]:
    """``(rows, cols, reductions)`` of statement ``name`` when a register block can hold its running values.

    ``name`` must be a C update ``lhs op= e`` whose ``e`` never names the
    updated array; ``cols`` is the iterator of the cell's last subscript (every
    access moves along it in its last subscript only, so the columns
    vectorise), ``rows`` another iterator subscripting the cell (the one of
    the next-to-last subscript if it is one), and the reductions are the
    statement's iterators the cell does not use.  A cell that moves along one
    loop gets a block along it, the other role :data:`NO_LOOP`.

    >>> # C[i][j] += alpha * A[i][k] * B[k][j]   -> ("i", "j", ["k"])
    >>> # tmp[i] = tmp[i] + A[i][j] * x[j]       -> ("i", "_", ["j"])   (8 chains)
    >>> # sum[p] += A[r][q][s] * C4[s][p]        -> ("_", "p", ["s"])   (8 vectors)
    >>> # A[i][j] -= A[i][k] * A[k][j]           -> None (e reads A)
    """
    st = s.scop.statement(name)
    if c_regblock.why_not(st) is not None or NO_LOOP in st.iters:
        return None
    plain = [e.name if isinstance(e, B.Iter) else None for e in st.body.index]
    used = B.iter_names(*st.body.index)
    reds = [v for v in st.iters if v not in used]
    if not reds:
        return None
    if len(plain) >= 2 and plain[-1] is not None:
        cols = plain[-1]
        candidates = [v for v in reversed(plain[:-1]) if v is not None and v != cols]
        return (candidates[0], cols, reds) if candidates else None
    if len(used) == 1 and plain and plain[-1] in used:
        # The cell moves along one loop: a block along it.  Where every access walks that loop with unit
        # stride (doitgen's sum[p] += A[r][q][s] * C4[s][p]) the compiler packs the cells into vectors;
        # elsewhere (atax's tmp[i] += A[i][j] * x[j]) the cells are independent in-order chains the CPU
        # overlaps, one FMA latency each.
        (v,) = used
        return (NO_LOOP, v, reds) if _unit_stride(s, name, v) else (v, NO_LOOP, reds)
    return None


def _shape(s: Schedule, rep: str, rows: str, cols: str, sizes: Mapping[str, int],
           machine: CMachine) -> Optional[Tuple[int, int, int]]:
    """``(mr, nr, lanes)`` of ``rep``'s block for the roles ``rows``/``cols``, or None when a tile size
    given in ``sizes`` is not a whole number of blocks (a loop absent from ``sizes`` is not tiled: its
    last, partial block runs the generic code)."""
    item = _arrays_of(s, [rep])[s.scop.statement(rep).body.array][0]
    if rows == NO_LOOP:
        mr, nr, lanes = 1, machine.line(item, vectors=True), machine.lanes(item)
        while nr > lanes and sizes.get(cols, 0) % nr:
            nr //= 2
    elif cols == NO_LOOP:
        mr, nr, lanes = machine.line(item, vectors=False), 1, 1
    else:
        (mr, nr), lanes = machine.block(item), machine.lanes(item)
    if (rows != NO_LOOP and sizes.get(rows, 0) % mr) or (cols != NO_LOOP and sizes.get(cols, 0) % nr):
        return None
    return mr, nr, lanes


def _note(rep: str, shape: Tuple[int, int, int], present: Sequence[str], reds: Sequence[str]) -> str:
    return (f"register block of {rep}: {shape[0]} x {shape[1]} running values over {', '.join(present)}, "
            f"reduction loops {', '.join(reds)} outside them")


def register_block(s: Schedule, rep: str, group: Sequence[str], band: Sequence[str], sizes: Mapping[str, int],
                   machine: CMachine, notes: List[str]) -> Schedule:
    """``s`` with a register block on statement ``rep`` of a tiled band (point loops ``band``), when
    :func:`block_roles` allows one, ``rep`` is alone in the band, the tile sizes are whole blocks and every
    step is legal; else ``s`` unchanged (the reason noted when a step is refused).

    >>> # register_block(s, "S1", ["S1"], ["i", "j", "k"], {"i": 32, "j": 32, "k": 32}, CMachine(), [])
    >>> # -> loops i_t, j_t, k_t, i_t1, j_t1, k, i, j with a regtile mark 4 x 16 (doubles)
    """
    roles = block_roles(s, rep)
    if roles is None or list(group) != [rep]:
        return s
    rows, cols, reds = roles
    present = [x for x in (rows, cols) if x != NO_LOOP]
    if not {*present, *reds} <= set(band):
        return s
    shape = _shape(s, rep, rows, cols, sizes, machine)
    if shape is None:
        return s
    mr, nr, lanes = shape
    try:
        t = tile_step(s, rep, {x: size for x, size in ((rows, mr), (cols, nr)) if x != NO_LOOP})
        t = reorder_step(t, rep, [l for l in t.loop_names(rep) if l in reds] + present)
        t = regtile_step(t, rep, rows, cols, mr=mr, nr=nr, lanes=lanes)
    except _REFUSED as e:
        notes.append(f"register block of {rep} refused: {str(e).splitlines()[0]}")
        return s
    notes.append(_note(rep, shape, present, reds))
    return t


def block_untiled(s: Schedule, machine: CMachine, notes: List[str], skip: Sequence[str] = ()) -> Schedule:
    """``s`` with register blocks on the deepest C updates of nests left untiled (``skip``: statements of
    tiled bands, which :func:`register_block` saw), each step legality-checked.

    The update gets its own nest below the loops outside its block and reduction loops (``distribute``),
    its block loops are strip-mined by the block, and the reduction loops move between the strips and
    the points, so the running values stay in registers across them.  Each cell still takes its
    updates in the original order: the output stays bitwise identical.

    Before: ``for r, q: for p: sum[p] = 0; for s: for p: sum[p] += A[r][q][s] * C4[s][p]``  (a load and
    a store of ``sum[p]`` per step: doitgen, whose temporary carries every outer loop, so no band tiles)
    After:  ``for r, q: for p: sum[p] = 0; for p_t: for s: for p in p_t's 32: ...`` + regtile mark
    """
    deepest = max((len(ss.loops()) for _, ss in s.stmts), default=0)
    for name in [n for n, _ in s.stmts]:
        loops = s.table[name].loops()  # of the schedule as the blocks before this one left it
        if name in skip or len(loops) < max(2, deepest) or \
                any(m[0] == name and m[2] == RegTile.keyword for m in s.marks):
            continue
        roles = block_roles(s, name)
        if roles is None:
            continue
        rows, cols, reds = roles
        present = [x for x in (rows, cols) if x != NO_LOOP]
        names = s.loop_names(name)
        if not {*present, *reds} <= set(names):
            continue  # a block or reduction loop was skewed or fused into another iterator
        if cols == NO_LOOP and vectorisable(s, name, loops[-1][0]):
            continue  # rows of chains are for in-order chains: a reassociated one is a SIMD dot product
        shape = _shape(s, name, rows, cols, {}, machine)  # no tile sizes to divide: always a shape
        # The reduction loops that run inside the strips: as many of the innermost as legality allows
        # (doitgen's r and q do not move sum[p] either, but sum is reset for every (r, q)).
        in_order = [l for l in names if l in reds]
        for k in range(len(in_order)):
            t = _block_nest(s, name, rows, cols, in_order[k:], present, shape, notes)
            if t is not None:
                break
        else:
            continue
        notes.append(_note(name, shape, present, in_order[k:]) + " (an untiled nest)")
        s = t
    return s


def _block_nest(s: Schedule, name: str, rows: str, cols: str, inner: Sequence[str], present: Sequence[str],
                shape: Tuple[int, int, int], notes: List[str]) -> Optional[Schedule]:
    """:func:`block_untiled`'s steps for one statement with the reduction loops ``inner`` inside the strips,
    or None when a step is refused (noted)."""
    mr, nr, lanes = shape
    names = s.loop_names(name)
    first = min(names.index(x) for x in (*present, *inner))
    try:
        t = s
        if any(g != name for g in s.group(name, s.loop_dim(name, names[first]) + 1)):
            t = distribute_step(t, name, first)  # others share the block's loops: its own nest
        t = tile_step(t, name, {x: size for x, size in ((rows, mr), (cols, nr)) if x != NO_LOOP})
        now = t.loop_names(name)
        strips = [tile_loop_name(t, name, x) for x in present]
        outer = [l for l in now if l not in (*strips, *inner, *present)]
        t = reorder_step(t, name, outer + strips + list(inner) + list(present))
        return regtile_step(t, name, rows, cols, mr=mr, nr=nr, lanes=lanes)
    except _REFUSED as e:
        notes.append(f"register block of {name} with {', '.join(inner)} inside refused: {str(e).splitlines()[0]}")
        return None


def unblocked_penalty(s: Schedule, hot: Sequence[str]) -> int:
    """How many of the statements ``hot`` could hold their running values in a register block
    (:func:`block_roles`) but have none in ``s``."""
    return sum(1 for name in hot if block_roles(s, name) is not None
               and not any(m[0] == name and m[2] == RegTile.keyword for m in s.marks))
