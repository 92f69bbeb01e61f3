"""Grammar-based random Tile programs, each with an independent numpy evaluation.

``generate(seed)`` returns a :class:`Case`: Tile program text, input arrays,
and what the program must produce, computed *here*, while the program is
written, by plain numpy (explicit enumeration of every contraction's index
box, ``ufunc.at`` folds, ``np.where``, casts), never by polytile code.  The
typing rules (PlaidML's promotion: floating beats integer, wider wins, the
first operand stays on a tie, integer literals/dimensions are int32, float
literals float32, comparisons give bool) are re-implemented from
docs/tile-language.md.

What the generator writes:

* 1-3 inputs (ranks 0-3; each axis a dimension name ``D0..D3`` or a fixed
  integer; sizes drawn from 0, 1, 2, 3, 4, 5, 6, 7, 11, 13; dtypes int32 mostly,
  also int8/int16/int64/uint8/uint32/float32/float64, sometimes mixed);
* 1-4 statements chained on what exists so far:
  - contractions: aggregation ``+ * > < =``, combination none/``+``/``*``/``==``/
    ``A == B ? C``, index polynomials ``c*v + o`` with coefficients -1..2,
    offsets that may be a dimension (``D0 - 1 - i``), sums of two or three
    variables, an exact division ``(...) / 2``, constraints ``poly < bound``,
    output sizes ``D``, ``D + 1``, ``D / 2``, ``2 * D`` or integers, ``default T``;
  - elementwise statements: a random typed expression tree over broadcastable
    tensors with + - * / (integer division truncates, x / 0 = 0), comparisons,
    ``?:``, bitwise ``& | ^ ~ << >>`` on integers, builtins (abs max min relu
    floor ceil round as_int as_uint as_float index, and inexact exp tanh
    sigmoid sqrt sin), dimensions as values, literals; printed with C
    precedence and only the parentheses it needs;
  - ``reshape(X, ...)`` and ``gather(V, I)``.

Every index variable gets at least one one-variable bound (``c*v + o`` in an
access or a constraint), so a finite box holds the domain; the box is
enumerated and filtered by every bound, constraint and exact division.  A
``=`` contraction whose box writes a cell twice expects ``CollisionError``.

Values are small integers (products under ``*`` aggregation are kept exact);
float outputs that went through a transcendental builtin are compared with a
tolerance, everything else exactly.

Command line: ``python tests/fuzz/gen_programs.py --seed 7 [--check]`` prints
one program with its inputs and expected outputs (and checks it).
"""
from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

# ---------------------------------------------------------------------------
# PlaidML typing, written from the docs
# ---------------------------------------------------------------------------

FLOATS = ("float16", "float32", "float64")
WIDTH = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "float16": 16, "int32": 32,
         "uint32": 32, "float32": 32, "int64": 64, "uint64": 64, "float64": 64}
INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def promote(types: Sequence[str]) -> str:
    out = None
    for t in types:
        if out is None:
            out = t
        elif (t in FLOATS) != (out in FLOATS):
            if t in FLOATS:
                out = t
        elif WIDTH[t] > WIDTH[out]:
            out = t
    return out


def is_int(t: str) -> bool:
    return t in INT_TYPES


def identity(agg: str, t: str):
    dt = np.dtype(t)
    if agg == "+":
        return dt.type(0)
    if agg == "*":
        return dt.type(1)
    low = agg == ">"
    if t == "bool":
        return np.bool_(not low)
    if t in FLOATS:
        return dt.type(-np.inf if low else np.inf)
    info = np.iinfo(dt)
    return dt.type(info.min if low else info.max)


class Retry(Exception):
    """This statement (or program) cannot be made exact: draw another."""


# ---------------------------------------------------------------------------
# values: a tensor (numpy array with its dtype) or a literal
# ---------------------------------------------------------------------------


@dataclass
class Val:
    value: object          # np.ndarray, or a python int/float for a literal
    dtype: str
    const: bool = False    # a literal or a dimension (bind-time constant)
    inexact: bool = False  # went through a transcendental builtin

    def arr(self, t: str) -> np.ndarray:
        """The value converted to ``t`` with C's conversions (float -> int truncates, low bits kept)."""
        v = np.asarray(self.value) if not self.const else np.array(self.value, dtype=np.float64 if isinstance(self.value, float) else np.int64)
        if t == "bool":
            return v != 0
        if is_int(t) and v.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                v = np.trunc(v).astype(np.int64)
        with np.errstate(over="ignore", invalid="ignore"):
            return v.astype(t)


def shape_of(v: Val) -> Tuple[int, ...]:
    return () if v.const else np.asarray(v.value).shape


# Expression nodes are printed with C precedence; higher binds tighter.
PREC = {"?": 1, "|": 2, "^": 3, "&": 4, "==": 5, "!=": 5, "<": 6, ">": 6, "<=": 6, ">=": 6,
        "<<": 7, ">>": 7, "+": 8, "-": 8, "*": 9, "/": 9, "unary": 10, "atom": 11}


@dataclass
class Node:
    text: str
    prec: int
    val: Val


def paren(n: Node, need: int) -> str:
    return n.text if n.prec >= need else f"({n.text})"


@dataclass
class Case:
    seed: int
    text: str
    inputs: List[Tuple[str, np.ndarray]]
    outputs: List[str]
    expected: Optional[Dict[str, np.ndarray]]   # None when an error is expected
    expect_error: Optional[str] = None          # polytile error class name
    inexact: Dict[str, bool] = field(default_factory=dict)
    features: List[str] = field(default_factory=list)

    @property
    def arrays(self) -> List[np.ndarray]:
        return [a for _, a in self.inputs]


SIZES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 7, 11, 13)
VARS = ("i", "j", "k", "l")


class Gen:
    def __init__(self, seed: int):
        self.seed = seed
        self.r = random.Random(seed)
        self.env: Dict[str, Val] = {}
        self.inputs: List[Tuple[str, List[str]]] = []
        self.dims: Dict[str, int] = {}
        self.body: List[str] = []
        self.features: List[str] = []
        self.temps = 0

    # -- helpers ---------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def feat(self, f: str) -> None:
        if f not in self.features:
            self.features.append(f)

    def values(self, dtype: str, shape: Tuple[int, ...]) -> np.ndarray:
        if dtype == "bool":
            return self.np_rng.integers(0, 2, size=shape).astype(bool)
        if dtype.startswith("uint"):
            return self.np_rng.integers(0, 9, size=shape).astype(dtype)
        v = self.np_rng.integers(-4, 5, size=shape)
        if dtype in FLOATS and self.chance(0.2):
            v = v / 2.0
        return v.astype(dtype)

    # -- inputs ------------------------------------------------------------
    def make_inputs(self) -> None:
        r = self.r
        self.np_rng = np.random.default_rng(self.seed)
        ndims = r.randint(1, 4)
        for d in range(ndims):
            self.dims[f"D{d}"] = r.choice(SIZES) if self.chance(0.93) else 0
        if not any(self.dims.values()) or self.chance(0.9):
            # mostly non-empty programs: zero sizes only sometimes
            for d in self.dims:
                if self.dims[d] == 0 and not self.chance(0.3):
                    self.dims[d] = r.choice(SIZES[1:])
        mode = r.random()
        if mode < 0.5:
            base = ["int32"]
        elif mode < 0.65:
            base = [r.choice(["float32", "float64"])]
        elif mode < 0.8:
            base = [r.choice(["int8", "int16", "int64", "uint8", "uint32"])]
        else:
            base = ["int32", "int8", "int16", "int64", "uint8", "uint32", "float32", "float64", "bool"]
            self.feat("mixed-dtypes")
        names = ["A", "B", "C", "E"]
        for n in range(r.randint(1, 3)):
            rank = r.choice([0, 1, 1, 2, 2, 2, 3, 3])
            axes: List[str] = []
            for _ in range(rank):
                if self.chance(0.8):
                    axes.append(r.choice(sorted(self.dims)))
                else:
                    axes.append(str(r.choice((1, 2, 3, 5))))
            dtype = r.choice(base)
            shape = tuple(self.dims[a] if a in self.dims else int(a) for a in axes)
            self.inputs.append((names[n], axes))
            self.env[names[n]] = Val(self.values(dtype, shape), dtype)
        used = {a for _, axes in self.inputs for a in axes if a in self.dims}
        self.dims = {d: v for d, v in self.dims.items() if d in used}

    def new_name(self) -> str:
        self.temps += 1
        return f"T{self.temps}"

    def tensors(self, pred=lambda v: True) -> List[str]:
        return [n for n, v in self.env.items() if not v.const and pred(v)]

    # -- index polynomials -----------------------------------------------
    def offset(self, allow_dim=True) -> Tuple[str, int]:
        """An offset: text and value (an integer, or a dimension like ``D0 - 1``)."""
        r = self.r
        if allow_dim and self.dims and self.chance(0.1):
            d = r.choice(sorted(self.dims))
            k = r.choice([0, 1, 1, 2])
            return (f"{d} - {k}" if k else d), self.dims[d] - k
        o = r.choice([0, 0, 0, 0, 1, -1, 2, -2])
        return str(o), o

    @staticmethod
    def poly_text(coefs: Dict[str, int], off_text: str, off_val: int) -> str:
        parts = []
        for v, c in coefs.items():
            t = v if abs(c) == 1 else f"{abs(c)}*{v}"
            parts.append(("-" if c < 0 else "+", t))
        if off_text != "0":
            if off_text.lstrip("-").isdigit():
                parts.append(("-" if off_val < 0 else "+", str(abs(off_val))))
            else:
                parts.append(("+", off_text if " " not in off_text else f"({off_text})"))
        if not parts:
            return "0"
        s = ("-" if parts[0][0] == "-" else "") + parts[0][1]
        for sign, t in parts[1:]:
            s += f" {sign} {t}"
        return s

    def poly(self, vars_: List[str], single_p: float = 0.8):
        """(text, coefs, offset, div): an affine index polynomial, possibly ``(...) / 2``."""
        r = self.r
        if self.chance(single_p) or len(vars_) == 1:
            chosen = [r.choice(vars_)]
        else:
            chosen = r.sample(vars_, min(len(vars_), r.choice([2, 2, 3])))
        coefs = {v: r.choice([1, 1, 1, 1, 2, -1]) for v in chosen}
        if len(chosen) == 1 and list(coefs.values())[0] == -1:
            if self.dims and self.chance(0.7):  # reversal: D - 1 - v
                d = r.choice(sorted(self.dims))
                off_text, off = f"{d} - 1", self.dims[d] - 1
            else:
                off = r.choice([1, 2, 3])
                off_text = str(off)
        else:
            off_text, off = self.offset()
        text = self.poly_text(coefs, off_text, off)
        div = 1
        if self.chance(0.03):
            div = 2
            text = f"({text}) / 2"
            self.feat("exact-division")
        return text, coefs, off, div

    def size_expr(self) -> Tuple[str, int]:
        r = self.r
        if not self.dims or self.chance(0.25):
            n = r.choice([1, 1, 2, 3, 4, 5, 7])
            return str(n), n
        d = r.choice(sorted(self.dims))
        v = self.dims[d]
        form = r.random()
        if form < 0.7:
            return d, v
        self.feat("size-expression")
        if form < 0.8:
            return f"{d} + 1", v + 1
        if form < 0.9:
            return f"{d} / 2", v // 2
        return f"2 * {d}", 2 * v

    # -- contractions ----------------------------------------------------
    def contraction(self) -> None:
        r = self.r
        agg = r.choice(["+", "+", "+", "*", ">", "<", "="])
        combo = r.choice([None, None, "+", "*", "*", "==", "?"])
        nops = {None: 1, "+": 2, "*": 2, "==": 2, "?": 3}[combo]
        cands = self.tensors(lambda v: not v.inexact or (combo in (None, "+", "*") and agg in "+*"))
        if not cands:
            raise Retry("no operand")
        nvars = r.choice([1, 2, 2, 3, 3, 4])
        vars_ = list(VARS[:nvars])
        accesses = []  # (name, [(coefs, off, div, size)])
        texts = []
        for _ in range(nops):
            name = r.choice(cands)
            shp = shape_of(self.env[name])
            idx, txt = [], []
            for s in shp:
                t, c, o, d = self.poly(vars_)
                idx.append((c, o, d, s))
                txt.append(t)
            accesses.append((name, idx))
            texts.append(f"{name}[{', '.join(txt)}]")
        out_rank = r.choice([0, 1, 1, 2, 2, 3])
        out_idx, out_txt, out_sizes, size_txt = [], [], [], []
        for _ in range(out_rank):
            t, c, o, d = self.poly(vars_, single_p=0.85)
            st, sv = self.size_expr()
            out_idx.append((c, o, d, sv))
            out_txt.append(t)
            out_sizes.append(sv)
            size_txt.append(st)
        constraints = []
        ctext = []
        for _ in range(r.choice([0, 0, 0, 1, 1, 2])):
            t, c, o, d = self.poly(vars_, single_p=0.5)
            st, sv = self.size_expr()
            constraints.append((c, o, d, sv))
            ctext.append(f"{t} < {st}")
        # every variable that occurs needs a one-variable bound
        rows = [x for _, idx in accesses for x in idx] + out_idx + constraints
        occurring = [v for v in vars_ if any(v in c for c, _, _, _ in rows)]
        for v in occurring:
            if not any(list(c) == [v] for c, _, _, _ in rows):
                st, sv = self.size_expr()
                constraints.append(({v: 1}, 0, 1, sv))
                ctext.append(f"{v} < {st}")
                rows.append(constraints[-1])
        if constraints:
            self.feat("constraint")
        # the box
        box = {}
        for v in occurring:
            lo, hi = -10 ** 9, 10 ** 9
            for c, o, d, s in rows:
                if list(c) != [v]:
                    continue
                cand = np.arange(-200, 201)
                e = c[v] * cand + o
                ok = (e % d == 0) & (e // d >= 0) & (e // d < s)
                if not ok.any():
                    lo, hi = 0, -1
                    break
                lo, hi = max(lo, int(cand[ok].min())), min(hi, int(cand[ok].max()))
            box[v] = (lo, hi)
        npts = 1
        for lo, hi in box.values():
            npts *= max(0, hi - lo + 1)
        if npts > 200_000:
            raise Retry("box too big")
        if occurring:
            grids = np.meshgrid(*[np.arange(lo, max(lo, hi + 1)) for lo, hi in box.values()], indexing="ij")
            pts = {v: g.ravel().astype(np.int64) for v, g in zip(occurring, grids)}
            npts = grids[0].size if grids else 1
        else:
            pts, npts = {}, 1
        mask = np.ones(npts, bool)

        def evalrow(c, o, d, s):
            e = np.full(npts, o, dtype=np.int64)
            for v, k in c.items():
                e = e + k * pts[v]
            ok = (e % d == 0) & (e // d >= 0) & (e // d < s)
            return e // d, ok

        acc_idx = []
        for name, idx in accesses:
            cols = []
            for row in idx:
                e, ok = evalrow(*row)
                mask &= ok
                cols.append(e)
            acc_idx.append(cols)
        ocols = []
        for row in out_idx:
            e, ok = evalrow(*row)
            mask &= ok
            ocols.append(e)
        for row in constraints:
            _, ok = evalrow(*row)
            mask &= ok

        def gather(k):
            name = accesses[k][0]
            v = self.env[name]
            a = np.asarray(v.value)
            cols = [c[mask] for c in acc_idx[k]]
            return a[tuple(cols)] if cols else np.broadcast_to(a, (int(mask.sum()),))

        dts = [self.env[n].dtype for n, _ in accesses]
        if combo == "==":
            t = "bool"
        else:
            t = promote(dts)
        if t == "bool" and combo in ("+", "*"):
            raise Retry("bool arithmetic")
        ops = [Val(gather(k), dts[k]) for k in range(nops)]
        match = None
        if combo is None:
            vals = ops[0].arr(t)
        elif combo in ("+", "*"):
            with np.errstate(over="ignore"):
                vals = ops[0].arr(t) + ops[1].arr(t) if combo == "+" else ops[0].arr(t) * ops[1].arr(t)
        elif combo == "==":
            pt = promote(dts)
            vals = ops[0].arr(pt) == ops[1].arr(pt)
        else:
            pt = promote(dts[:2])
            match = ops[0].arr(pt) == ops[1].arr(pt)
            if agg == "=":
                vals = ops[2].arr(t)
            else:
                vals = np.where(match, ops[2].arr(t), identity(agg, t)).astype(t)
        if agg == "*" and t != "bool":
            # keep products exact: check in float64
            big = {"int32": 2 ** 30, "uint32": 2 ** 31, "int64": 2 ** 52, "uint64": 2 ** 52,
                   "float32": 2 ** 23, "float64": 2 ** 50}.get(t)
            if big is not None and vals.size:
                logs = np.zeros(int(np.prod(out_sizes)) if out_sizes else 1)
                flat = np.ravel_multi_index(tuple(c[mask] for c in ocols), out_sizes) if ocols else np.zeros(vals.size, np.int64)
                np.add.at(logs, flat, np.log2(np.maximum(np.abs(vals.astype(np.float64)), 1)))
                if logs.max() > np.log2(big):
                    raise Retry("product too big")
        if agg == "+" and t not in ("bool", "int8", "int16", "uint8") and vals.size:
            if np.abs(vals.astype(np.float64)).sum() > 2 ** 23:
                raise Retry("sum too big")

        # default tensor
        default = None
        shape = tuple(out_sizes)
        if out_rank and self.chance(0.15) and not (agg == "=" and combo == "?"):
            same = self.tensors(lambda v: shape_of(v) == shape and not v.inexact)
            if same:
                default = r.choice(same)
                self.feat("default")
        out = np.zeros(shape, dtype=t)
        if default:
            out[...] = self.env[default].arr(t)
        flat = (np.ravel_multi_index(tuple(c[mask] for c in ocols), shape) if ocols
                else np.zeros(int(mask.sum()), np.int64))
        expect_error = None
        of = out.reshape(-1)
        if agg == "=":
            counts = np.bincount(flat, minlength=of.size) if flat.size else np.zeros(of.size, int)
            if (counts > 1).any():
                expect_error = "CollisionError"
            else:
                w = flat if match is None else flat[match]
                of[w] = vals if match is None else vals[match]
        else:
            if flat.size:
                of[np.unique(flat)] = identity(agg, t)
                ufunc = {"+": np.add, "*": np.multiply, ">": np.maximum, "<": np.minimum}[agg]
                with np.errstate(over="ignore"):
                    ufunc.at(of, flat, vals.astype(t))
        name = self.new_name()
        outtxt = f"{name}[{', '.join(out_txt)}" + (f" : {', '.join(size_txt)}]" if out_rank else "]")
        rhs = {None: "{0}", "+": "{0} + {1}", "*": "{0} * {1}", "==": "{0} == {1}", "?": "{0} == {1} ? {2}"}[combo]
        stmt = f"{outtxt} = {agg}({rhs.format(*texts)})" + "".join(f", {c}" for c in ctext)
        if default:
            stmt += f" default {default}"
        self.feat(f"agg{agg}")
        self.feat(f"combo{combo}")
        if expect_error:
            self.body.append(stmt)
            raise ExpectedError(expect_error)
        self.body.append(stmt)
        inexact = any(self.env[n].inexact for n, _ in accesses)
        self.env[name] = Val(out, t, inexact=inexact)

    # -- elementwise -----------------------------------------------------
    def leaf(self, shape_ok, exact_only: bool) -> Node:
        r = self.r
        if self.chance(0.25):
            if self.dims and self.chance(0.3):
                d = r.choice(sorted(self.dims))
                self.feat("dim-as-value")
                return Node(d, PREC["atom"], Val(self.dims[d], "int32", const=True))
            if self.chance(0.6):
                n = r.choice([0, 1, 1, 2, 3, 5, 7])
                return Node(str(n), PREC["atom"], Val(n, "int32", const=True))
            f = r.choice([0.5, 1.5, 2.0, 0.25, 3.0])
            return Node(repr(f), PREC["atom"], Val(f, "float32", const=True))
        names = self.tensors(lambda v: shape_ok(shape_of(v)) and not (exact_only and v.inexact))
        if not names:
            n = r.choice([1, 2, 3])
            return Node(str(n), PREC["atom"], Val(n, "int32", const=True))
        n = r.choice(names)
        return Node(n, PREC["atom"], self.env[n])

    def expr(self, depth: int, shape_ok, exact_only: bool = False) -> Node:
        r = self.r
        if depth <= 0 or self.chance(0.25):
            return self.leaf(shape_ok, exact_only)
        kind = r.random()
        if kind < 0.45:
            return self.binary(depth, shape_ok, exact_only)
        if kind < 0.55:
            return self.compare(depth, shape_ok)
        if kind < 0.63:
            c = self.compare(depth, shape_ok)
            a = self.expr(depth - 1, shape_ok, exact_only)
            b = self.expr(depth - 1, shape_ok, exact_only)
            t = promote([a.val.dtype, b.val.dtype])
            if a.val.const and b.val.const:
                return a
            v = np.where(c.val.arr("bool"), a.val.arr(t), b.val.arr(t))
            self.feat("select")
            return Node(f"{paren(c, 2)} ? {paren(a, 2)} : {paren(b, 1)}", PREC["?"],
                        Val(v, t, inexact=a.val.inexact or b.val.inexact))
        if kind < 0.72:
            a = self.expr(depth - 1, shape_ok, exact_only)
            if a.val.const:
                return a
            if is_int(a.val.dtype) and self.chance(0.4):
                t = a.val.dtype
                self.feat("bitwise")
                return Node(f"~{paren(a, PREC['unary'])}", PREC["unary"], Val(~a.val.arr(t), t))
            if a.val.dtype == "bool":
                return a
            with np.errstate(over="ignore"):
                return Node(f"-{paren(a, PREC['unary'])}", PREC["unary"],
                            Val(-a.val.arr(a.val.dtype), a.val.dtype, inexact=a.val.inexact))
        return self.call(depth, shape_ok, exact_only)

    def operands(self, depth, shape_ok, exact_only):
        """Two operands of one binary operation, or None: both constant, or shapes that do not broadcast."""
        a = self.expr(depth - 1, shape_ok, exact_only)
        b = self.expr(depth - 1, shape_ok, exact_only)
        if a.val.const and b.val.const:
            return None
        try:
            np.broadcast_shapes(shape_of(a.val), shape_of(b.val))
        except ValueError:
            return None
        return a, b

    def binary(self, depth, shape_ok, exact_only) -> Node:
        r = self.r
        for _ in range(6):
            pair = self.operands(depth, shape_ok, exact_only)
            if pair is None:
                continue
            a, b = pair
            t = promote([a.val.dtype, b.val.dtype])
            if t == "bool":
                continue
            ops = ["+", "-", "*"]
            if is_int(t):
                ops += ["/", "&", "|", "^"]
                if not a.val.const:
                    ops += ["<<", ">>"]
            elif b.val.const and b.val.value in (0.5, 2.0, 0.25, 2, 4):
                ops += ["/"]
            op = r.choice(ops)
            x, y = a.val.arr(t), b.val.arr(t)
            if op in ("<<", ">>"):
                k = r.choice([0, 1, 2, 3, WIDTH[promote([a.val.dtype, "int32"])] + 1])
                b = Node(str(k), PREC["atom"], Val(k, "int32", const=True))
                t = promote([a.val.dtype, "int32"])
                x = a.val.arr(t)
                y = np.array(k % WIDTH[t], dtype=t)
                if op == "<<":
                    # keep left shifts away from the sign bit: C makes that undefined
                    if np.abs(x.astype(np.float64)).max(initial=0) * 2.0 ** int(y) >= 2.0 ** (WIDTH[t] - 2):
                        continue
            self.feat(f"op{op}")
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                if op == "+":
                    v = x + y
                elif op == "-":
                    v = x - y
                elif op == "*":
                    v = x * y
                elif op == "/":
                    if is_int(t):
                        yy = np.where(y == 0, 1, y)
                        q = np.abs(x.astype(np.int64)) // np.abs(yy.astype(np.int64))
                        q = np.where((x < 0) != (yy < 0), -q, q)
                        v = np.where(y == 0, 0, q).astype(t)
                    else:
                        v = x / y
                elif op == "&":
                    v = x & y
                elif op == "|":
                    v = x | y
                elif op == "^":
                    v = x ^ y
                elif op == "<<":
                    v = np.left_shift(x, y)
                else:
                    v = np.right_shift(x, y)
            v = np.asarray(v).astype(t)
            if is_int(t) and WIDTH[t] >= 32 and op in "+-*":
                f = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a.val.arr("float64"), b.val.arr("float64"))
                if not t.startswith("uint") and np.abs(f).max(initial=0) >= 2 ** (WIDTH[t] - 2):
                    continue
            p = PREC[op]
            return Node(f"{paren(a, p)} {op} {paren(b, p + 1)}", p,
                        Val(v, t, inexact=a.val.inexact or b.val.inexact))
        return self.leaf(shape_ok, exact_only)

    def compare(self, depth, shape_ok) -> Node:
        r = self.r
        for _ in range(6):
            pair = self.operands(depth, shape_ok, True)
            if pair is None:
                continue
            a, b = pair
            op = r.choice(["==", "!=", "<", ">", "<=", ">="])
            t = promote([a.val.dtype, b.val.dtype])
            x, y = a.val.arr(t), b.val.arr(t)
            v = {"==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater,
                 "<=": np.less_equal, ">=": np.greater_equal}[op](x, y)
            p = PREC[op]
            self.feat("compare")
            return Node(f"{paren(a, p + 1)} {op} {paren(b, p + 1)}", p, Val(np.asarray(v), "bool"))
        a = self.leaf(shape_ok, True)
        return a

    def call(self, depth, shape_ok, exact_only) -> Node:
        r = self.r
        a = self.expr(depth - 1, shape_ok, exact_only)
        if a.val.const:
            return a
        t = a.val.dtype
        fns = ["abs", "max", "min", "relu", "as_int", "as_float", "as_uint", "index"]
        if t in FLOATS:
            fns += ["floor", "ceil", "round"]
            if not exact_only:
                fns += ["exp", "tanh", "sigmoid", "sqrt", "sin"]
        else:
            fns += ["floor"]
        if t == "bool":
            fns = ["as_int", "as_float", "max"]
        fn = r.choice(fns)
        x = a.val.arr(t)
        self.feat(f"fn-{fn}")
        inexact = a.val.inexact
        with np.errstate(over="ignore", invalid="ignore"):
            if fn == "abs":
                v, rt = np.abs(x), t
            elif fn in ("max", "min"):
                b = self.expr(depth - 1, shape_ok, True)
                try:
                    np.broadcast_shapes(shape_of(a.val), shape_of(b.val))
                except ValueError:
                    return a
                if b.val.dtype == "bool" and t == "bool":
                    return a
                ct = promote([t, b.val.dtype])
                lt = a.val.arr(ct) < b.val.arr(ct)
                if fn == "max":
                    rt = promote([b.val.dtype, t])
                    v = np.where(lt, b.val.arr(rt), a.val.arr(rt))
                else:
                    rt = promote([t, b.val.dtype])
                    v = np.where(lt, a.val.arr(rt), b.val.arr(rt))
                return Node(f"{fn}({a.text}, {b.text})", PREC["atom"], Val(np.asarray(v).astype(rt), rt, inexact=inexact))
            elif fn == "relu":
                rt = promote(["float32", t])
                v = np.where(x < 0, np.zeros((), rt), a.val.arr(rt))
            elif fn in ("as_int", "as_uint", "as_float"):
                if inexact:
                    return a
                bits = r.choice({"as_int": [8, 16, 32, 64], "as_uint": [8, 16, 32, 64], "as_float": [32, 64]}[fn])
                rt = {"as_int": "int", "as_uint": "uint", "as_float": "float"}[fn] + str(bits)
                self.feat("cast")
                return Node(f"{fn}({a.text}, {bits})", PREC["atom"], Val(a.val.arr(rt), rt))
            elif fn == "index":
                if x.ndim == 0 or not re.fullmatch(r"[A-Z][A-Za-z0-9]*", a.text):
                    return a  # index() takes a tensor name
                ax = r.randrange(x.ndim)
                v = np.indices(x.shape)[ax].astype("int32") if x.size else np.zeros(x.shape, "int32")
                return Node(f"index({a.text}, {ax})", PREC["atom"], Val(v, "int32"))
            elif fn in ("floor", "ceil", "round"):
                if inexact:
                    return a
                rt = t
                if t in FLOATS:
                    v = {"floor": np.floor, "ceil": np.ceil,
                         "round": lambda z: np.sign(z) * np.floor(np.abs(z) + 0.5)}[fn](x)
                else:
                    v = x
            else:
                rt = t
                inexact = True
                if fn == "sqrt":
                    return Node(f"sqrt(abs({a.text}))", PREC["atom"], Val(np.sqrt(np.abs(x)).astype(t), t, inexact=True))
                if fn == "exp":
                    return Node(f"exp({paren(a, PREC['*'])} / 8)", PREC["atom"],
                                Val(np.exp(x / np.array(8, t)).astype(t), t, inexact=True))
                v = {"tanh": np.tanh, "sin": np.sin, "sigmoid": lambda z: 1 / (1 + np.exp(-z))}[fn](x)
        return Node(f"{fn}({a.text})", PREC["atom"], Val(np.asarray(v).astype(rt), rt, inexact=inexact))

    def elementwise(self) -> None:
        r = self.r
        names = self.tensors()
        target = shape_of(self.env[r.choice(names)]) if names else ()

        def shape_ok(s):
            try:
                return np.broadcast_shapes(s, target) == target
            except ValueError:
                return False
        e = self.expr(r.randint(1, 3), shape_ok)
        if e.val.const:
            raise Retry("constant")
        name = self.new_name()
        self.body.append(f"{name} = {e.text}")
        self.env[name] = Val(np.asarray(e.val.value), e.val.dtype, inexact=e.val.inexact)
        self.feat("elementwise")

    def special(self) -> None:
        r = self.r
        if self.chance(0.5):
            cands = self.tensors(lambda v: np.asarray(v.value).size > 0)
            if not cands:
                raise Retry("nothing to reshape")
            src = r.choice(cands)
            a = np.asarray(self.env[src].value)
            n = a.size
            divs = [d for d in range(1, n + 1) if n % d == 0]
            d1 = r.choice(divs)
            shape = (d1, n // d1) if self.chance(0.6) else (n,)
            if self.chance(0.3):
                shape = (1,) + shape
            texts = []
            for s in shape:
                dn = [d for d, v in self.dims.items() if v == s]
                texts.append(r.choice(dn) if dn and self.chance(0.4) else str(s))
            name = self.new_name()
            self.body.append(f"{name} = reshape({src}, {', '.join(texts)})")
            self.env[name] = Val(a.reshape(shape), self.env[src].dtype, inexact=self.env[src].inexact)
            self.feat("reshape")
        else:
            vs = self.tensors(lambda v: np.asarray(v.value).ndim >= 1 and np.asarray(v.value).shape[0] > 0)
            ix = self.tensors(lambda v: is_int(v.dtype) and not v.inexact and np.asarray(v.value).ndim <= 2)
            if not vs or not ix:
                raise Retry("nothing to gather")
            vn, iname = r.choice(vs), r.choice(ix)
            v, i = np.asarray(self.env[vn].value), np.asarray(self.env[iname].value)
            idx = np.clip(i.astype(np.int64), 0, v.shape[0] - 1)
            name = self.new_name()
            self.body.append(f"{name} = gather({vn}, {iname})")
            self.env[name] = Val(v[idx], self.env[vn].dtype, inexact=self.env[vn].inexact)
            self.feat("gather")

    # -- the program -------------------------------------------------------
    def build(self) -> Case:
        r = self.r
        self.make_inputs()
        nstmts = r.choice([1, 1, 2, 2, 3, 4])
        expect_error = None
        made = 0
        tries = 0
        while made < nstmts and tries < 30:
            tries += 1
            kind = r.random()
            snapshot = (dict(self.env), list(self.body), self.temps, list(self.features))
            try:
                if kind < 0.6 or made == 0 and kind < 0.8:
                    self.contraction()
                elif kind < 0.9:
                    self.elementwise()
                else:
                    self.special()
                made += 1
            except Retry:
                self.env, self.body, self.temps, self.features = snapshot
                self.env = dict(self.env)
            except ExpectedError as e:
                expect_error = e.args[0]
                self.feat("expect-" + expect_error)
                break
        if made == 0 and expect_error is None:
            raise Retry("no statement")
        temps = [n for n in self.env if n.startswith("T")]
        if expect_error:
            outputs = [f"T{self.temps}"]
        else:
            outputs = [temps[-1]]
            if len(temps) > 1 and self.chance(0.3):
                outputs.insert(r.randrange(2), r.choice(temps[:-1]))
        header = ", ".join(f"{n}[{', '.join(axes)}]" if (axes or self.chance(0.5)) else n
                           for n, axes in self.inputs)
        text = f"function ({header}) -> ({', '.join(outputs)}) {{\n" + "".join(f"  {s};\n" for s in self.body) + "}\n"
        ins = [(n, np.asarray(self.env[n].value)) for n, _ in self.inputs]
        if expect_error:
            return Case(self.seed, text, ins, outputs, None, expect_error, {}, self.features)
        expected = {o: np.asarray(self.env[o].value) for o in outputs}
        return Case(self.seed, text, ins, outputs, expected, None,
                    {o: self.env[o].inexact for o in outputs}, self.features)


class ExpectedError(Exception):
    pass


def generate(seed: int) -> Case:
    """One program for ``seed`` (deterministic); retries internally with derived seeds."""
    for attempt in range(50):
        try:
            case = Gen(seed * 1000 + attempt).build()
            case.seed = seed
            return case
        except Retry:
            continue
    raise RuntimeError(f"generator could not make a program for seed {seed}")


# ---------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------


def compare(name: str, got, want: np.ndarray, inexact: bool) -> Optional[str]:
    """None if equal (exactly; with a tolerance for inexact floats), else why not."""
    got = np.asarray(got)
    if got.dtype != want.dtype:
        return f"{name}: dtype {got.dtype} != expected {want.dtype}"
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != expected {want.shape}"
    if want.dtype.kind == "f":
        if inexact:
            ok = np.isclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
        else:
            ok = (got == want) | (np.isnan(got) & np.isnan(want))
    else:
        ok = got == want
    if not np.all(ok):
        bad = np.argwhere(~np.asarray(ok))[:3]
        return (f"{name}: {int((~np.asarray(ok)).sum())} cells differ, e.g. at {bad.tolist()}: "
                f"got {[got[tuple(b)].item() for b in bad]} expected {[want[tuple(b)].item() for b in bad]}")
    return None


def describe(case: Case) -> str:
    lines = [case.text.rstrip()]
    for n, a in case.inputs:
        lines.append(f"{n} = np.array({a.tolist()!r}, dtype=np.{a.dtype})")
    if case.expect_error:
        lines.append(f"expected: {case.expect_error}")
    else:
        for o, a in case.expected.items():
            lines.append(f"expected {o} = np.array({a.tolist()!r}, dtype=np.{a.dtype})")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--check", action="store_true", help="also run the three-way check (all options)")
    a = ap.parse_args()
    c = generate(a.seed)
    print(describe(c))
    print("features:", ", ".join(c.features))
    if a.check:
        import json

        from campaign_programs import check_case
        print(json.dumps(check_case(c, a.seed), indent=1, default=str))
