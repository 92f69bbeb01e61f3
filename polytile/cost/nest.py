"""A statement's loop nest as the cost model sees it, read from a schedule.

How gcc compiles an innermost loop (vectorised, a reduction chain, scalar)
and the share of full register blocks, used by both predictions; and the
nest of any schedule (:func:`_stmt_nest`): tiles at every depth from the
time maps with isl, the marks deciding parallelism and register tiles.
"""
from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import islpy as isl

from ..poly import body as B
from ..poly.scop import Statement
from ..errors import InternalError
from ..scheduling.marks import NO_LOOP, RegTile
from .footprints import _StmtInfo, _cells, _conflict_levels, _image_sizes, _info, _line_bytes, _sets_touched
from .roofline import _Nest, _chains, _depends, _plain_lanes

# ---------------------------------------------------------------------------
# The code of the innermost loop and of the register blocks (both predictions)
# ---------------------------------------------------------------------------


def _stmt_dtype(s, st: Statement) -> str:
    try:
        return s.scop.array(st.body.array).dtype
    except KeyError:
        return st.body.value.dtype


def _classify_innermost(st: Statement, it: Optional[str], reduction: bool) -> str:
    """How gcc compiles the innermost loop over iterator ``it`` (see docs/cost-model.md)."""
    if it is None:
        return "scalar"
    if reduction:
        return "reduction"
    loads = list(B.loads(st.body.value))
    refs = [ld.index for ld in loads] + [st.body.index]
    for index in refs:
        coeffs = [_coeff(e, it) for e in index]
        if any(c is None for c in coeffs):
            return "scalar"
        if not coeffs or all(c == 0 for c in coeffs):
            continue  # invariant: hoisted
        if any(c != 0 for c in coeffs[:-1]) or abs(coeffs[-1]) != 1:
            return "scalar"
    return "vector"


def _coeff(e, it: str) -> Optional[int]:
    """Coefficient of ``it`` in an affine index expression (None when it is not a plain integer)."""
    if isinstance(e, B.Iter):
        return 1 if e.name == it else 0
    if isinstance(e, B.Const):
        return 0
    if isinstance(e, B.Neg):
        c = _coeff(e.operand, it)
        return None if c is None else -c
    if isinstance(e, B.Cast):
        return _coeff(e.operand, it)
    if isinstance(e, B.Bin):
        a, b = _coeff(e.a, it), _coeff(e.b, it)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            if isinstance(e.a, B.Const):
                return int(e.a.value) * b
            if isinstance(e.b, B.Const):
                return a * int(e.b.value)
            return None if (a or b) else 0
        if e.op == "//":
            return 0 if a == 0 else None
    if isinstance(e, B.Load):
        return 0 if it not in B.iter_names(e) else None
    return None


def _leftover(outer: int, block: int) -> int:
    """Points of an ``outer``-tile left over after its full ``block``-blocks (``block`` if none are)."""
    return (outer % block) or block


def _regtile_fraction(extent: int, outer: int, block: int) -> float:
    """Fraction of ``extent`` points inside full ``block``-blocks when tiles of ``outer`` (a multiple) cut it."""
    if extent <= 0 or block <= 0:
        return 0.0
    outer = max(block, min(outer, extent))
    full_tiles, rem = divmod(extent, outer)
    rows = full_tiles * (outer // block) * block + (rem // block) * block
    return rows / extent


def _block_cost(extent: int, outer: int, block: int) -> float:
    """Blocks along one axis times their width, per point of the axis, when tiles of ``outer`` cut
    ``extent`` points into ``block``-blocks and a partial block costs a whole one (1.0: no partial blocks).

    >>> _block_cost(1024, 256, 8), _block_cost(1020, 256, 8)   # 128 blocks; 128 blocks for 1020 rows
    (1.0, 1.003921568627451)
    """
    if extent <= 0 or block <= 0:
        return 1.0
    outer = max(block, min(outer, extent))
    full_tiles, rem = divmod(extent, outer)
    blocks = full_tiles * -(-outer // block) + -(-rem // block)
    return blocks * block / extent


def regtile_parts(rows: Tuple[int, int, int], cols: Tuple[int, int, int], kind: str, vec: int,
                  edges: bool) -> Tuple[float, list]:
    """``(full, plain)`` of a register tile: the instances' weight at the micro-kernel's rate and the
    plain-loop parts ``(fraction, kind, innermost trips, vector chains)``, given ``(extent, tile, block)``
    of the row and the column axis.

    With ``edges`` (a Tile kernel's micro-kernel: :func:`polytile.codegen.microkernel._edge_block`) a
    partial block runs the micro-kernel at a full block's cost, so the weight counts every block
    whole; otherwise (C statements' blocks) partial blocks run the plain loops: columns left over at
    the end of each column tile, and rows left over in full-width column blocks.

    >>> regtile_parts((1020, 256, 8), (1024, 512, 32), "vector", 16, True)
    (1.003921568627451, [])
    """
    (ei, oi, mr), (ej, oj, nr) = rows, cols
    if edges:
        return _block_cost(ei, oi, mr) * _block_cost(ej, oj, nr), []
    f_i, rem_i = _regtile_fraction(ei, oi, mr), _leftover(min(oi, ei), mr)
    f_j, rem_j = _regtile_fraction(ej, oj, nr), _leftover(min(oj, ej), nr)
    return f_i * f_j, [(1 - f_j, kind, float(rem_j), mr * rem_j / vec),
                       (f_j * (1 - f_i), kind, float(nr), rem_i * nr / vec)]


def edge_blocks(st: Statement, cols_extent: int, nr: int, rows: Optional[str] = None,
                cols: Optional[str] = None) -> bool:
    """Whether a register tile of ``st`` runs its partial blocks in the micro-kernel: a Tile
    statement (C statements' blocks have no edge kernel), at least one full column block (the
    edge block shifts its columns left by up to ``nr - 1``) or, given the block's ``rows`` and
    ``cols`` loops, columns it may pad (:func:`pads_columns`), and a value that reads no cell of the
    array it writes (the shifted columns are computed and thrown away)."""
    return (st.c_text is None and all(ld.array != st.body.array for ld in B.loads(st.body.value))
            and (cols_extent >= nr or (rows is not None and cols is not None and pads_columns(st, rows, cols))))


def pads_columns(st: Statement, rows: str, cols: str) -> bool:
    """Whether a register block of ``st`` may be wider than its columns: every load that moves with the
    ``cols`` loop is a column operand a pack can serve (two or more axes, ``cols`` alone in one of them
    as ``cols + c``, no reduction loop there) and none moves with ``rows`` too.  The block then reads
    zero-padded packed slivers (``codegen.microkernel.padded_columns``); ``autotile.pack_plan`` packs
    those operands for such a block.  Statement-level only: whether the packs exist is the schedule's.

    >>> # C[i, j] = +(A[i, k] * B[k, j]): True;  C[i, j] = +(A[i, k] * B[k, j] * X[i, j]): False
    """
    if st.c_text is not None:
        return False
    reds = set(st.iters) - B.iter_names(*st.body.index)
    found = False
    for ld in B.loads(st.body.value):
        if ld.array == st.body.array:
            return False
        its = [B.iter_names(e) for e in ld.index]
        if not any(cols in x for x in its):
            continue
        axes = [d for d, x in enumerate(its) if cols in x]
        if any(rows in x for x in its) or len(axes) != 1 or len(ld.index) < 2 or its[axes[0]] & reds:
            return False
        e = ld.index[axes[0]]
        if not (isinstance(e, B.Iter) or (isinstance(e, B.Bin) and e.op in ("+", "-")
                                          and isinstance(e.a, B.Iter) and e.a.name == cols
                                          and cols not in B.iter_names(e.b))):
            return False
        found = True
    return found


# ---------------------------------------------------------------------------
# The nest of any schedule (predict): tiles from the time maps with isl
# ---------------------------------------------------------------------------


def _central_point(info: _StmtInfo) -> Optional[List[int]]:
    """An instance near the middle of the domain (the centre of its box if inside, else a sample)."""
    dom = info.stmt.domain
    if dom.is_empty():
        return None
    if len(info.extent) == info.n:
        mid = [info.lo[it] + (info.extent[it] - 1) // 2 for it in info.stmt.iters]
        cons = " and ".join(f"{it} = {v}" for it, v in zip(info.stmt.iters, mid)) or "true"
        pt = isl.Set(f"{{ {info.stmt.name}[{', '.join(info.stmt.iters)}] : {cons} }}", context=info.ctx)
        if not pt.intersect(dom).is_empty():
            return mid
    p = dom.sample_point()
    return [int(p.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(info.n)]


def _time_of_point(m: isl.Map, info: _StmtInfo, x: Sequence[int]) -> List[int]:
    cons = " and ".join(f"{it} = {v}" for it, v in zip(info.stmt.iters, x)) or "true"
    at = isl.Set(f"{{ {info.stmt.name}[{', '.join(info.stmt.iters)}] : {cons} }}", context=info.ctx)
    img = at.apply(m)
    p = img.sample_point()
    return [int(p.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(img.dim(isl.dim_type.set))]


def _stmt_nest(s, name: str, hw) -> Optional[_Nest]:
    st = s.scop.statement(name)
    info = _info(st, s.scop.arrays)
    ss = s.table[name]
    if info.count == 0:
        return None
    loops = ss.loops()
    x = _central_point(info)
    t = _time_of_point(ss.map, info, x)
    n_time = ss.map.dim(isl.dim_type.out)
    tvars = [f"t{d}" for d in range(n_time)]
    line = _line_bytes(hw)
    shapes = {a.name: tuple(a.shape) for a in s.scop.arrays}
    conflict = _conflict_levels(hw)
    fp_el, fp_ln, inst = [], [], []
    tiles: List[isl.Set] = []

    def tile_fixing(dims: Iterable[int]) -> isl.Set:
        """Instances whose time dimensions ``dims`` equal the central instance's."""
        cons = " and ".join(f"{tvars[d]} = {t[d]}" for d in dims) or "true"
        pre = isl.Set(f"{{ [{', '.join(tvars)}] : {cons} }}", context=info.ctx)
        return ss.map.intersect_range(pre).domain().intersect(st.domain)

    for depth in range(len(loops) + 1):
        tile = tile_fixing(range(loops[depth][0] if depth < len(loops) else n_time))
        tiles.append(tile)
        fp_el.append(_image_sizes(info, tile, None))
        fp_ln.append(_image_sizes(info, tile, line))
        inst.append(info.count if depth == 0 else _cells(tile))
    trips = [inst[l] / max(inst[l + 1], 1) for l in range(len(loops))]
    names = [n for _, n in loops]
    marks = {(m[1], m[2]): m[3] for m in s.marks if m[0] == name}
    par = next((k for k, nm in enumerate(names) if (nm, "parallel") in marks), None)
    notes: List[str] = []
    dtype = _stmt_dtype(s, st)
    item = info.itemsize.get(info.written, 4)
    vec = _plain_lanes(hw, dtype)
    # The innermost loop isl emits (one with more than one iteration) and what it scans.
    d_in = len(loops) - 1
    while d_in > 0 and trips[d_in] <= 1.0 + 1e-9:
        d_in -= 1
    kind, inner, chains = "scalar", 1.0, math.inf
    if loops:
        inner = trips[d_in]
        it_in = _scanned(st, tiles, d_in)
        simd = (names[d_in], "simd") in marks
        carried = not s.carried([name], loops[d_in][0], s.deps.all(include_reductions=True)).is_empty()
        only_red = carried and s.carried([name], loops[d_in][0], s.deps.all(include_reductions=False)).is_empty()
        if carried and not (only_red and st.is_reduction):
            kind = "scalar"
        else:
            kind = _classify_innermost(st, it_in, only_red and st.is_reduction and not simd)
        chains = _chains(trips, fp_el, info.written, item, vec)
        d_out = next((d for d in range(d_in - 1, -1, -1) if trips[d] > 1.0 + 1e-9), None)
        if kind == "reduction" and d_out is not None and _depends(fp_el, info.written, d_out):
            # gcc -O3 interchanges an innermost reduction loop with the output loop around it
            # when that loop is unit-stride in every access (-floop-interchange), then vectorises it.
            it_out = _scanned(st, tiles, d_out)
            if _classify_innermost(st, it_out, False) == "vector":
                kind, inner, chains = "vector", trips[d_out], trips[d_out] / vec
                notes.append(f"gcc interchanges {names[d_in]} and {names[d_out]} (unit stride in {names[d_out]})")
                # The nest that runs has the two loops swapped: between them, one iteration of
                # the reduction loop spans the whole output loop.
                mid = tile_fixing(list(range(loops[d_out][0])) + [loops[d_in][0]])
                for depth in range(d_out + 1, d_in + 1):
                    tiles[depth] = mid
                    fp_el[depth] = _image_sizes(info, mid, None)
                    fp_ln[depth] = _image_sizes(info, mid, line)
                trips[d_out], trips[d_in] = trips[d_in], trips[d_out]
                names[d_out], names[d_in] = names[d_in], names[d_out]
                if par in (d_out, d_in):
                    par = d_in if par == d_out else d_out
    regtile, full = None, 0.0
    plain = [(1.0, kind, inner, chains)]
    if loops and kind == "vector" and it_in is not None and inner >= 1:
        # A tiled innermost loop runs its full width in all but the last block of each
        # enclosing tile, which gets the leftover (nr = 48 in a tile of 64: 48, then 16).
        f, rem = _block_split(info, st, tiles, it_in, int(round(inner)))
        if f < 1.0:
            plain = [(f, kind, inner, chains), (1 - f, kind, float(rem), chains * rem / inner)]
    reg = next(((nm, marks[(nm, "regtile")]) for nm in names if (nm, "regtile") in marks), None)
    parsed = _regtile_mark(reg[1]) if reg is not None else None
    if parsed is not None:
        ri, mr, rj, nr, lanes = parsed.rows, parsed.mr, parsed.cols, parsed.nr, parsed.lanes
        regtile = (mr, nr, lanes)
        # Each block loop's iterator is cut into tiles (the next-wider width among the tiles'
        # extents of it, e.g. mc) and those into blocks; partial blocks run the plain loops.
        axes = [(b, b, b) if it == NO_LOOP else _block_axis(info, st, tiles, it, b) for it, b in ((ri, mr), (rj, nr))]
        full, plain = regtile_parts(axes[0], axes[1], kind, vec,
                                    NO_LOOP not in (ri, rj) and edge_blocks(st, axes[1][0], nr, ri, rj))
    memo: Dict[tuple, int] = {}

    def sets_of(l: int, a: str, lb: int, n: int) -> int:
        key = (l, a, lb, n)
        if key not in memo:
            memo[key] = _sets_touched(info, tiles[l], a, shapes.get(a), lb, n)
        return memo[key]

    sets = {nm: (ways, lambda l, a, lb=lb, n=nsets: sets_of(l, a, lb, n)) for nm, lb, nsets, ways in conflict}
    return _Nest(name, names, trips, fp_el, fp_ln, info.written, float(info.ops * info.count), dtype,
                 par, regtile, full, plain, notes, sets, item)


def _scanned(st: Statement, tiles: Sequence[isl.Set], d: int) -> Optional[str]:
    """The iterator loop ``d`` scans: the one that varies in its tile but not inside it (None if not one)."""
    inner = tiles[d + 1] if d + 1 < len(tiles) else None
    its = [it for k, it in enumerate(st.iters)
           if _varies(tiles[d], k) and (inner is None or not _varies(inner, k))]
    return its[0] if len(its) == 1 else None


def _width(tile: isl.Set, k: int) -> int:
    lo, hi = tile.dim_min_val(k), tile.dim_max_val(k)
    if not (lo.is_int() and hi.is_int()):
        return 0
    return int(hi.to_python()) - int(lo.to_python()) + 1


def _block_split(info: _StmtInfo, st: Statement, tiles: Sequence[isl.Set], it: str, block: int) -> Tuple[float, int]:
    """(fraction of ``it``'s extent in full ``block``-blocks, width of the blocks left over)."""
    ext, outer, _ = _block_axis(info, st, tiles, it, block)
    return _regtile_fraction(ext, outer, block), _leftover(outer, block)


def _block_axis(info: _StmtInfo, st: Statement, tiles: Sequence[isl.Set], it: str, block: int) -> Tuple[int, int, int]:
    """``(extent, tile width, block)`` of the block loop ``it`` (the next-wider width among the tiles'
    extents of it, e.g. mc); ``(block, block, block)``, one full block, when ``it`` is not the statement's."""
    if it not in st.iters or it not in info.extent:
        return block, block, block
    k = st.iters.index(it)
    ext = info.extent[it]
    widths = {_width(t, k) for t in tiles}
    return ext, min((w for w in widths if w > block), default=ext), block


def _varies(tile: isl.Set, d: int) -> bool:
    lo, hi = tile.dim_min_val(d), tile.dim_max_val(d)
    return not (lo.is_int() and hi.is_int() and lo.to_python() == hi.to_python())


def _regtile_mark(arg) -> Optional[RegTile]:
    """The register-tile mark whose argument is ``arg`` (e.g. ``"1 i=8 j=32 16"``); None if it is not one
    (the model then predicts the plain loops, as codegen would run them)."""
    try:
        return RegTile.from_arg(str(arg))
    except InternalError:
        return None
