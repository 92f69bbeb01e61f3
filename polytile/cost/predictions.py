"""The cost model's entry points: :func:`predict_config` (a TileConfig's blocked nest) and :func:`predict`."""
from __future__ import annotations

from dataclasses import replace
from typing import List, Tuple

from ..hardware import CPUDescriptor, HardwareError
from ..poly import body as B
from .footprints import _box_sets_one, _conflict_levels, _info, _line_bytes, box_footprints
from .nest import _classify_innermost, _leftover, _regtile_fraction, _stmt_dtype, _stmt_nest, edge_blocks, regtile_parts
from .roofline import Prediction, _Nest, _chains, _evaluate, _plain_lanes, compute_bound

# ---------------------------------------------------------------------------
# predict_config: the blocked nest of a TileConfig, analytically
# ---------------------------------------------------------------------------


def predict_config(s, cfg, hw) -> Prediction:
    """Predicted time of ``cfg``'s blocked nest (autotile's BLIS-style schedule) for its statement.

    Only ``cfg.stmt`` is modelled (the configurations being ranked differ in
    nothing else).  Fast: no schedule is built, footprints are boxes at the
    domain's origin cached per box.  See docs/cost-model.md for the model.

        >>> # predict_config(s, TileConfig("S0", "i", "j", "k", 64, 256, 256, 8, 32, 16, "jki", "j_t"), hw).time_s
    """
    return _evaluate([_config_nest(s, cfg, hw, footprints=True)], hw)


def config_bound(s, cfg, hw) -> float:
    """A lower bound of ``predict_config(s, cfg, hw).time_s``, without footprints: its compute term.

    Ranking hundreds of configurations, most can be ruled out by this alone (their compute
    time already exceeds a prediction made), at a fraction of a full prediction's cost.

        >>> # config_bound(s, cfg, hw) <= predict_config(s, cfg, hw).time_s
    """
    return compute_bound(_config_nest(s, cfg, hw, footprints=not cfg.regtile), hw)


def _config_nest(s, cfg, hw, *, footprints: bool) -> _Nest:
    """``cfg``'s blocked nest as the model sees it; without ``footprints`` only what its compute term
    reads is filled in (a register tile's plain parts do not depend on footprints; a plain nest's do)."""
    if not isinstance(hw, CPUDescriptor):
        raise HardwareError(f"the cost model describes CPUs; got a {getattr(hw, 'kind', type(hw).__name__)} descriptor")
    st, arrays = _packed_layout(s.scop.statement(s.resolve(cfg.stmt)), s.scop.arrays, cfg)
    info = _info(st, arrays)
    E = info.extent
    # What depends only on the statement and its roles, worked out once per ranking, not per configuration.
    memo = info.config_memo
    hit = memo.get((cfg.i, cfg.j, cfg.k))
    if hit is None or hit[0] is not s.scop:
        used = B.iter_names(*st.body.index)
        hit = (s.scop, [v for v in st.iters if v in used and v not in (cfg.i, cfg.j)],
               [v for v in st.iters if v not in used and v != cfg.k], _stmt_dtype(s, st),
               _classify_innermost(st, cfg.j, False))
        memo[(cfg.i, cfg.j, cfg.k)] = hit
    _, outer, reds, dtype, kind = hit
    mc = max(1, min(cfg.mc, E[cfg.i]))
    nc = max(1, min(cfg.nc, E[cfg.j]))
    kc = max(1, min(cfg.kc, E[cfg.k]))
    mr = max(1, min(cfg.mr, mc))
    nr = max(1, min(cfg.nr, nc))
    # Each loop: (name, iterator, step = points of the iterator one iteration covers, trips).
    loops: List[Tuple[str, str, int, float]] = [(v, v, 1, float(E[v])) for v in outer]
    tile = {"i": (f"{cfg.i}_t", cfg.i, mc, E[cfg.i] / mc), "j": (f"{cfg.j}_t", cfg.j, nc, E[cfg.j] / nc),
            "k": (f"{cfg.k}_t", cfg.k, kc, E[cfg.k] / kc)}
    loops += [tile[c] for c in cfg.order]
    blocks = {"j": (f"{cfg.j}_t1", cfg.j, nr, nc / nr), "i": (f"{cfg.i}_t1", cfg.i, mr, mc / mr)}
    loops += [blocks[c] for c in cfg.inner]
    loops += [(v, v, 1, float(E[v])) for v in reds]
    loops += [(cfg.k, cfg.k, 1, float(kc)), (cfg.i, cfg.i, 1, float(mr)), (cfg.j, cfg.j, 1, float(nr))]
    fp_el, fp_ln, sets = [], [], {}
    if footprints:
        line = _line_bytes(hw)
        shapes = {a.name: tuple(a.shape) for a in arrays}
        conflict = _conflict_levels(hw)
        boxes, box = [{}], {}
        for name, it, step, _ in loops:
            box = dict(box)
            box[it] = (info.lo[it], step)
            boxes.append(box)
        fp_el, fp_ln = box_footprints(st, boxes, line)
        sets = {name: (ways, lambda l, a, lb=lb, n=nsets: _box_sets_one(st, boxes[l], a, shapes.get(a), lb, n))
                for name, lb, nsets, ways in conflict}
    names = [l[0] for l in loops]
    par = names.index(cfg.parallel) if cfg.parallel in names else None
    item = info.itemsize.get(info.written, 4)
    vec = _plain_lanes(hw, dtype)
    trips = [l[3] for l in loops]
    if cfg.regtile:
        regtile = (cfg.mr, cfg.nr, cfg.lanes)
        full, plain = regtile_parts((E[cfg.i], mc, cfg.mr), (E[cfg.j], nc, cfg.nr), kind, vec,
                                    edge_blocks(st, E[cfg.j], cfg.nr, cfg.i, cfg.j))
    else:
        # The j loop runs nr iterations in full column blocks and the leftover of each nc-tile
        # in the last one.
        regtile, full = None, 0.0
        f_j, rem_j = _regtile_fraction(E[cfg.j], nc, nr), _leftover(nc, nr)
        chains = _chains(trips, fp_el, info.written, item, vec)
        plain = [(f_j, kind, float(nr), chains), (1 - f_j, kind, float(rem_j), chains * rem_j / nr)]
    return _Nest(st.name, names, trips, fp_el, fp_ln, info.written,
                 float(info.ops * info.count), dtype, par, regtile, full, plain, sets=sets, itemsize=item)


def _packed_layout(st, arrays, cfg) -> Tuple[object, Tuple]:
    """``st`` and ``arrays`` as ``cfg``'s register tile reads them: a column operand indexed by the
    column loop on another axis than its last (``B[j][k]`` of ``A @ B.T``) is copied into a packed
    panel where ``j`` is the last axis (autotile.pack_plan, codegen/pack.py), so it is modelled as
    ``B'[k][j]``.  Read in place, every vector of it is a gather over ``nr`` lines, and the model saw
    the configurations of ``A @ B.T`` as 30x slower than those of ``A @ B``, all alike: its pick ran
    1.2x slower than the GEMM's configuration on the same data.  Unchanged without packing.

    >>> # C[i, j] += A[i, k] * B[j, k], cfg.j == "j"  ->  C[i, j] += A[i, k] * B'[k, j], B' of shape (K, N)
    """
    if not (cfg.regtile and cfg.pack):
        return st, arrays
    memo = _info(st, arrays).config_memo
    key = ("packed", cfg.i, cfg.j, arrays)
    if key not in memo:
        memo[key] = _permuted(st, arrays, cfg.i, cfg.j)
    return memo[key]


def _permuted(st, arrays, i: str, j: str):
    moved = {}

    def uses(e, it):
        return it in B.iter_names(e)

    def view(n):
        if isinstance(n, B.Load):
            axes = [d for d, e in enumerate(n.index) if uses(e, j)]
            if n.array == st.body.array or len(axes) != 1 or axes[0] == len(n.index) - 1 \
                    or any(uses(e, i) for e in n.index):
                return n
            perm = [d for d in range(len(n.index)) if d != axes[0]] + axes
            if moved.setdefault(n.array, perm) != perm:
                raise ValueError("one array read in two layouts")
            return B.Load(n.array, tuple(n.index[d] for d in perm), n.dtype)
        if isinstance(n, B.Bin):
            return B.Bin(n.op, view(n.a), view(n.b), n.dtype)
        if isinstance(n, B.Neg):
            return B.Neg(view(n.operand), n.dtype)
        if isinstance(n, (B.Const, B.Iter)):
            return n
        raise ValueError(f"no packed view through {type(n).__name__}")

    try:
        value = view(st.body.value)
    except ValueError:
        return st, arrays
    if not moved:
        return st, arrays
    out = tuple(replace(a, shape=tuple(a.shape[d] for d in moved[a.name])) if a.name in moved else a for a in arrays)
    return replace(st, body=replace(st.body, value=value)), out


# ---------------------------------------------------------------------------
# predict: any schedule, tiles from the time maps with isl
# ---------------------------------------------------------------------------


def predict(s, hw) -> Prediction:
    """Predicted time of any schedule ``s``: every statement's nest, one after the other.

    Tiles come from the time maps (isl), marks decide the code quality and
    the parallelism; see docs/cost-model.md.  Slower than
    :func:`predict_config` (tens of ms per statement).
    """
    if not isinstance(hw, CPUDescriptor):
        raise HardwareError(f"the cost model describes CPUs; got a {getattr(hw, 'kind', type(hw).__name__)} descriptor")
    nests = [n for n in (_stmt_nest(s, name, hw) for name, _ in s.stmts) if n is not None]
    return _evaluate(nests, hw)
