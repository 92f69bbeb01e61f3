"""What the autotiler adds around a blocked contraction: its elementwise consumers fused into the cache
tiles (:func:`fuse_epilogues`) and, with one reduction segment, its output zeroed block by block
(:func:`zero_per_block`).  Both are legality-checked schedule steps; a step that does not apply leaves
the schedule as it was.
"""
from __future__ import annotations

from typing import List

from .errors import PolytileError
from .poly import body as B
from .scheduling import Schedule


def zero_per_block(s: Schedule, cfg, r, cache_bytes: int) -> Schedule:
    """With one reduction segment (``kc`` covers the whole ``k``), zero each register block right
    before it is summed (``fuse_first``) instead of in a pass over the whole output before.

    Each block is then written once from registers after it was zeroed in L1; the separate pass
    wrote the output to memory and the blocks read it back: M=4096, N=4096, K=64 took 9.9 ms against
    numpy's 9.0 and takes 8.5.  With several segments the output is re-read per segment anyway and
    the fused zeroing measured within noise (SGEMM 1024^3: 4.5 ms either way), so it is left as is.
    So is an output that fits ``cache_bytes`` (the descriptor's last cache): its pass never reaches
    memory, and the fused nest costs compile time (matmul 256^3 cold: +100 ms on llvm, +55 ms gcc).

    ``s`` is blocked by ``cfg`` (an :class:`~polytile.autotile.TileConfig`, :func:`polytile.autotile.apply`);
    ``r`` are the statement's :class:`~polytile.autotile.Roles` before.  Only outputs larger than
    ``cache_bytes``.

    >>> # Z0: C = 0; S0 blocked with kc >= K  ->  fuse_first(s, "S0", "Z0", depth of the block loops)
    """
    st = s.scop.statement(r.stmt)
    if not cfg.regtile or cfg.kc < r.extents[r.k] or s.scop.array(st.body.array).nbytes <= cache_bytes:
        return s
    fills = [z.name for z in s.scop.statements if z.kind == "fill" and z.body.array == st.body.array]
    resets = [z for z in s.scop.statements if z.kind == "reset" and z.body.array == st.body.array]
    if len(fills) != 1 or resets:
        return s
    names = s.loop_names(r.stmt)
    try:
        return s.fuse_first(r.stmt, fills[0], max(names.index(f"{r.i}_t1"), names.index(f"{r.j}_t1")) + 1)
    except PolytileError:
        return s


def _consumers(s: Schedule, stmt: str) -> List[str]:
    """Elementwise statements reading ``stmt``'s output cell-for-cell (same shape, no broadcast)."""
    st = s.scop.statement(stmt)
    out = []
    for e in s.scop.statements:
        if e.kind != "elementwise":
            continue
        for ld in B.loads(e.body.value):
            if ld.array == st.body.array and all(isinstance(x, B.Iter) for x in ld.index) \
                    and [x.name for x in ld.index] == list(e.iters):
                out.append(e.name)
                break
    return out


def fuse_epilogues(s: Schedule, cfg) -> Schedule:
    """Fuse the elementwise consumers of a blocked contraction into its cache-tile loops.

    ``Y = relu(C + bias)`` after ``C`` blocked as ``j_t, i_t, k_t, ...``: ``Y``
    is tiled alike and runs inside ``j_t, i_t`` right after the ``k_t`` loop
    has finished that ``mc x nc`` block of ``C``, while it is still in cache.
    The loops outside ``k_t`` are the ones that can be shared (inside it the
    block is not complete yet); each step is legality-checked, and a consumer
    that does not fit keeps its own nest.

    Running ``Y`` per register block instead (``fuse_last`` at the tile loops,
    reading the block from L1) measured within noise on the C target and 13%
    slower on the llvm target for matmul+bias+relu 1024^3, so it is a schedule
    step users can ask for, not the default.  So is the mirror for the
    initialisation (``fuse_first``: ``C = 0`` on each register block right before
    its first reduction step, instead of a separate pass): SGEMM 2048^3 measured
    within noise of the separate pass (2-core Xeon, fresh output each call).
    """
    st = cfg.stmt
    names = s.loop_names(st)
    kt = f"{cfg.k}_t"
    if kt not in names:
        return s
    shared = names[:names.index(kt)]
    if not shared:
        return s
    tiles = {f"{cfg.i}_t": (cfg.i, cfg.mc), f"{cfg.j}_t": (cfg.j, cfg.nc)}
    out_idx = s.scop.statement(st).body.index
    prev = st
    for e in _consumers(s, st):
        e_iters = s.scop.statement(e).iters
        if len(e_iters) != len(out_idx):
            continue
        # contraction output iterator -> consumer iterator (a constant output index has none)
        rename = {x.name: v for x, v in zip(out_idx, e_iters) if isinstance(x, B.Iter)}
        try:
            sizes = {rename[v]: size for _, (v, size) in tiles.items() if v in rename}
            t = s.tile(e, sizes)
            order = []
            for n in shared:
                if n in tiles:
                    order.append(f"{rename[tiles[n][0]]}_t")
                else:
                    order.append(rename.get(n, n))
            order += [x for x in t.loop_names(e) if x not in order]
            t = t.reorder(e, order)
            t = t.fuse(prev, e, len(shared))
        except (PolytileError, KeyError):
            continue
        s, prev = t, e
    return s
