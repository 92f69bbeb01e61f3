"""Hand-written numpy equivalents of the programs in ``examples/``, and helpers
to build test inputs from the examples' header comments.

Each function here is written from what the example *means* (see the comment at
the top of each ``.tile`` file), in plain numpy, never by interpreting Tile.
They follow the semantics of ``shared/tile-language.md`` exactly: output cells
that no iteration point reaches are 0 (or come from a ``default`` tensor),
out-of-bounds reads are skipped (zero padding), ``A == B ? C`` contributes the
aggregation's identity where A != B.  A function takes the program's inputs in
header order and returns one array, or a tuple in header order for several
outputs.

``example_cases(path)`` reads the ``// dims:``, ``// shape:`` and
``// inputs:`` lines of an example; ``make_inputs(program, case, rng, dtype)``
draws random inputs for one case.  Other test files reuse both.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"


# ---------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------


def matmul(A, B):
    return A @ B


def batched_matmul(X, Y):
    return np.matmul(X, Y)


def matmul_abt(A, B):
    return A @ B.T


def matvec(A, X):
    return A @ X


def trmv(L, X):
    return np.tril(L) @ X


def vecmat(X, A):
    return X @ A


def dot(X, Y):
    return np.asarray(np.dot(X, Y))


def outer(X, Y):
    return np.outer(X, Y)


def transpose(I):
    return I.T.copy()


def gemm(A, B, C, Alpha, Beta):
    return Alpha * (A @ B) + Beta * C


def min_plus(A, B):
    # C[i, j] = min over k of A[i, k] + B[k, j]
    return (A[:, :, None] + B[None, :, :]).min(axis=1)


def matmul_bias_relu(A, W, B):
    return np.maximum(A @ W + B, 0)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------


def row_sum(I):
    return I.sum(axis=1)


def row_max(I):
    return I.max(axis=1)


def min_reduce(I):
    return I.min(axis=0)


def product(I):
    return I.prod(axis=1)


def mean(X):
    return X.sum(axis=1) / X.shape[1]


def frobenius(X):
    ss = np.asarray((X * X).sum())
    return ss, np.sqrt(ss)


def layernorm_stats(X):
    n = X.shape[1]
    mu = X.sum(axis=1, keepdims=True) / n
    var = ((X - mu) ** 2).sum(axis=1, keepdims=True) / n
    return mu, var


def geomean(X):
    return np.exp(np.log(X).sum(axis=1) / X.shape[1])


def cumsum(I):
    return np.cumsum(I)


def suffix_sum(I):
    return np.cumsum(I[::-1])[::-1]


def softmax(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def masked_max(X, Key, V):
    # Non-matching entries contribute max's identity, -inf; a row without any
    # match is still reached, so it is -inf rather than 0.
    return np.where(Key == V, X, -np.inf).max(axis=1)


# ---------------------------------------------------------------------------
# Convolutions and pooling
# ---------------------------------------------------------------------------


def _conv2d_valid(I, F):
    """NHWC x HWIO cross-correlation without padding, stride 1."""
    n, h, w, ci = I.shape
    kh, kw, ci2, co = F.shape
    assert ci == ci2
    ho, wo = h - kh + 1, w - kw + 1
    out = np.zeros((n, ho, wo, co), dtype=np.result_type(I, F))
    for ky in range(kh):
        for kx in range(kw):
            window = I[:, ky:ky + ho, kx:kx + wo, :]  # [n, ho, wo, ci]
            out += np.tensordot(window, F[ky, kx], axes=([3], [0]))
    return out


def conv1d(I, F):
    n, length, ci = I.shape
    kw, _, co = F.shape
    lo = length - kw + 1
    out = np.zeros((n, lo, co), dtype=np.result_type(I, F))
    for k in range(kw):
        out += I[:, k:k + lo, :] @ F[k]
    return out


def conv2d(I, F):
    return _conv2d_valid(I, F)


def global_avgpool(I):
    return I.sum(axis=(1, 2)) / (I.shape[1] * I.shape[2])


def conv2d_same(I, F):
    # Skipped out-of-bounds reads == zero padding of one cell on each side.
    padded = np.pad(I, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return _conv2d_valid(padded, F)


def conv2d_nchw(I, F):
    # channels-first: the NHWC "same" convolution of the transposed image, transposed back.
    return conv2d_same(I.transpose(0, 2, 3, 1), F).transpose(0, 3, 1, 2)


def conv2d_strided(I, F):
    # A stride-2 convolution keeps every other row/column of the stride-1 one;
    # there are (H - KH) // 2 + 1 of them.
    return _conv2d_valid(I, F)[:, ::2, ::2, :]


def depthwise_conv(I, F):
    n, h, w, c = I.shape
    kh, kw, _ = F.shape
    ho, wo = h - kh + 1, w - kw + 1
    out = np.zeros((n, ho, wo, c), dtype=np.result_type(I, F))
    for ky in range(kh):
        for kx in range(kw):
            out += I[:, ky:ky + ho, kx:kx + wo, :] * F[ky, kx]
    return out


def _pool_windows(I):
    """[N, H, W, C] -> [N, H//2, W//2, C, 4]: the 2x2 stride-2 windows (odd edges dropped)."""
    n, h, w, c = I.shape
    ho, wo = h // 2, w // 2
    t = I[:, :2 * ho, :2 * wo, :].reshape(n, ho, 2, wo, 2, c)
    return t.transpose(0, 1, 3, 5, 2, 4).reshape(n, ho, wo, c, 4)


def maxpool(I):
    return _pool_windows(I).max(axis=-1)


def avgpool(I):
    return _pool_windows(I).sum(axis=-1) / 4


# ---------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------


def upsample2x(I):
    return np.repeat(np.repeat(I, 2, axis=0), 2, axis=1)


def zero_stuff(I):
    h, w = I.shape
    out = np.zeros((2 * h, 2 * w), dtype=I.dtype)
    out[::2, ::2] = I
    return out


def slice_update(Base, P):
    m, n = Base.shape
    r = min(P.shape[0], m - 1)
    c = min(P.shape[1], n - 1)
    out = Base.copy()
    out[1:1 + r, 1:1 + c] = P[:r, :c]
    return out


def stencil2d(I):
    out = np.zeros_like(I)
    out[:, 1:-1, 1:-1] = (I[:, :-2, 1:-1] + I[:, 2:, 1:-1] + I[:, 1:-1, :-2] + I[:, 1:-1, 2:]
                          - 4 * I[:, 1:-1, 1:-1])
    return out


def onehot(L, Z):
    k = Z.shape[0]
    return L[:, None] == np.arange(k)[None, :]  # PlaidML types '==' as bool


def embedding(L, T):
    k, d = T.shape
    out = np.zeros((L.shape[0], d), dtype=T.dtype)
    for n, label in enumerate(L):
        if label == int(label) and 0 <= label < k:
            out[n] = T[int(label)]
    return out


def triu(X):
    return np.triu(X)


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def elementwise_chain(X, Y):
    e = np.exp(-np.abs(X))
    t = np.tanh(X) * _sigmoid(Y)
    r = np.sqrt(np.abs(X * Y))
    return np.where(X >= Y, e + t, r - t)


def math_builtins(X, Y):
    a = np.sqrt(X) * np.log(X) + 1.0 / Y - np.power(X, Y)
    b = (np.maximum(X, Y) - np.minimum(np.floor(X / 3), np.ceil(Y / 3))
         + np.sin(X) * np.cos(Y) + np.tan(X / 8))
    return a, b


def casts(X, S):
    q = np.trunc(X * 3 / 2).astype(np.int32).astype(np.float64)
    return q + np.round(X / 3) - S


NUMPY = {
    "matmul": matmul,
    "batched_matmul": batched_matmul,
    "matmul_abt": matmul_abt,
    "matvec": matvec,
    "vecmat": vecmat,
    "dot": dot,
    "outer": outer,
    "transpose": transpose,
    "gemm": gemm,
    "min_plus": min_plus,
    "matmul_bias_relu": matmul_bias_relu,
    "row_sum": row_sum,
    "row_max": row_max,
    "min_reduce": min_reduce,
    "product": product,
    "mean": mean,
    "frobenius": frobenius,
    "layernorm_stats": layernorm_stats,
    "geomean": geomean,
    "cumsum": cumsum,
    "suffix_sum": suffix_sum,
    "trmv": trmv,
    "softmax": softmax,
    "masked_max": masked_max,
    "conv1d": conv1d,
    "conv2d": conv2d,
    "conv2d_same": conv2d_same,
    "conv2d_nchw": conv2d_nchw,
    "conv2d_strided": conv2d_strided,
    "depthwise_conv": depthwise_conv,
    "maxpool": maxpool,
    "avgpool": avgpool,
    "global_avgpool": global_avgpool,
    "upsample2x": upsample2x,
    "zero_stuff": zero_stuff,
    "slice_update": slice_update,
    "stencil2d": stencil2d,
    "onehot": onehot,
    "embedding": embedding,
    "triu": triu,
    "elementwise_chain": elementwise_chain,
    "math_builtins": math_builtins,
    "casts": casts,
}

# Examples whose results are not exact for integer-valued inputs (true division
# by a non-power of two, exp/log/sqrt/trig, or sums of such values in an order
# the two sides may not share).  They are compared with TOLERANCE; everything
# else must match exactly.
INEXACT = frozenset({
    "mean", "global_avgpool", "softmax", "layernorm_stats", "frobenius", "geomean",
    "elementwise_chain", "math_builtins",
})
TOLERANCE = dict(rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------------
# Reading an example's header comments and building inputs
# ---------------------------------------------------------------------------

_DIMS_RE = re.compile(r"^\s*//\s*dims\s*:(.*)$")
_SHAPE_RE = re.compile(r"^\s*//\s*shape\s*:(.*)$")
_INPUTS_RE = re.compile(r"^\s*//\s*inputs\s*:(.*)$")
_HEADER_RE = re.compile(r"function\s*\((.*?)\)\s*->", re.S)
_INPUT_RE = re.compile(r"\s*([#$]?[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[([^\]]*)\])?\s*$")


def _parse_assignments(text: str, what: str, path) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ValueError(f"{path}: bad `// {what}:` item {item!r} (want NAME=VALUE)")
        name, value = (s.strip() for s in item.split("=", 1))
        out[name.lstrip("#")] = value
    return out


def _parse_shape(text: str, path) -> Tuple[int, ...]:
    text = text.strip()
    if not text:
        return ()
    try:
        return tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"{path}: bad shape {text!r} (want e.g. 3x4x5)") from None


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def header_inputs(source: str) -> List[Tuple[str, Optional[Tuple[Union[str, int], ...]]]]:
    """The header's inputs as (name, dims) pairs read straight from the text.

    ``dims`` is None for an input declared without brackets, ``()`` for a
    scalar, else a tuple of dimension names and integers (like ``ir.Input``).
    """
    m = _HEADER_RE.search(_strip_comments(source))
    if not m:
        raise ValueError("no `function (...) ->` header found")
    inner = m.group(1)
    # Split on commas that are not inside brackets.
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    result = []
    for part in parts:
        im = _INPUT_RE.match(part)
        if not im:
            raise ValueError(f"cannot read header input {part.strip()!r}")
        name, dims = im.group(1), im.group(2)
        name = name.lstrip("#")
        if dims is None:
            result.append((name, None))
        else:
            ds: List[Union[str, int]] = []
            for d in dims.split(","):
                d = d.strip()
                if not d:
                    continue
                ds.append(int(d) if d.isdigit() else d.lstrip("#"))
            result.append((name, tuple(ds)))
    return result


def _shape_of(name, dims, dimsizes: Dict[str, int], named: Dict[str, Tuple[int, ...]]) -> Tuple[int, ...]:
    if dims is None:
        if name not in named:
            raise ValueError(f"input {name} has no declared dims and no `// shape: {name}=...` line")
        return named[name]
    shape = []
    for d in dims:
        if isinstance(d, int):
            shape.append(d)
        else:
            key = d.lstrip("#")
            if key not in dimsizes:
                raise ValueError(f"input {name}: dimension {d} has no size in the `// dims:` line")
            shape.append(dimsizes[key])
    return tuple(shape)


def example_cases(path) -> List[dict]:
    """The test cases of one example file.

    One case per ``// dims:`` line: ``{"dims": {name: size}, "shapes": [shape
    of each input in header order], "named_shapes": {input: shape} (from
    ``// shape:``), "positive": bool}``.  A single ``// shape:`` line applies
    to every case; otherwise there must be one per ``// dims:`` line, paired
    in order.
    """
    path = Path(path)
    source = path.read_text()
    dims_lines, shape_lines, positive = [], [], False
    for line in source.splitlines():
        if m := _DIMS_RE.match(line):
            dims_lines.append({k: int(v) for k, v in _parse_assignments(m.group(1), "dims", path).items()})
        elif m := _SHAPE_RE.match(line):
            shape_lines.append({k: _parse_shape(v, path)
                                for k, v in _parse_assignments(m.group(1), "shape", path).items()})
        elif m := _INPUTS_RE.match(line):
            words = {w.strip().lower() for w in m.group(1).split(",")}
            positive = positive or "positive" in words
    if not dims_lines:
        raise ValueError(f"{path}: no `// dims:` line")
    if len(shape_lines) > 1 and len(shape_lines) != len(dims_lines):
        raise ValueError(f"{path}: {len(shape_lines)} `// shape:` lines for {len(dims_lines)} `// dims:` lines")
    inputs = header_inputs(source)
    cases = []
    for n, dimsizes in enumerate(dims_lines):
        named = shape_lines[n] if len(shape_lines) > 1 else (shape_lines[0] if shape_lines else {})
        shapes = [_shape_of(name, dims, dimsizes, named) for name, dims in inputs]
        cases.append({"dims": dict(dimsizes), "shapes": shapes, "named_shapes": dict(named),
                      "positive": positive})
    return cases


def input_shapes(program, case) -> List[Tuple[int, ...]]:
    """Each input's shape from a parsed program's header (``ir.Input``) and a case."""
    named = case.get("named_shapes", {})
    return [_shape_of(inp.name, inp.dims, case["dims"], named) for inp in program.inputs]


def make_inputs(program, case, rng: np.random.Generator, dtype=np.float64) -> List[np.ndarray]:
    """Random integer-valued inputs for ``program`` under one case of ``example_cases``.

    Values are integers in [-4, 4], or in [1, 4] when the example says
    ``// inputs: positive``, stored as ``dtype`` (exact in any float type).
    ``program`` is either a parsed ``ir.Program`` or a sequence of shapes.
    """
    if isinstance(program, Sequence) and not hasattr(program, "inputs"):
        shapes = [tuple(s) for s in program]
    else:
        shapes = input_shapes(program, case)
    lo, hi = (1, 4) if case.get("positive") else (-4, 4)
    return [np.asarray(rng.integers(lo, hi + 1, size=shape)).astype(dtype) for shape in shapes]


def example_paths() -> List[Path]:
    return sorted(EXAMPLES_DIR.glob("*.tile"))
