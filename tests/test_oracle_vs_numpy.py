"""The reference interpreter against hand-written numpy, on every example.

For each ``examples/*.tile`` with an entry in ``numpy_programs.NUMPY`` and for
each of its ``// dims:`` lines, random integer-valued float64 inputs (in
[-4, 4], or [1, 4] for ``// inputs: positive``) go through
``polytile.reference.run`` and through the numpy function.  Integer-valued
data keeps sums and products exact, so results must be equal, except for the
examples in ``INEXACT`` (true division, exp, log, sqrt, trig), which are
compared with ``rtol=1e-6, atol=1e-9``.  Shapes and dtypes (float64 in,
float64 out) must match too.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from polytile import interpreter as reference
from polytile.frontends import tile

try:
    from numpy_programs import (INEXACT, NUMPY, TOLERANCE, example_cases, example_paths,
                                header_inputs, make_inputs)
except ImportError:  # tests/ imported as a package
    from tests.numpy_programs import (INEXACT, NUMPY, TOLERANCE, example_cases, example_paths,
                                      header_inputs, make_inputs)

PATHS = example_paths()


def _cases():
    for path in PATHS:
        name = path.stem
        if name not in NUMPY:
            continue
        for n, case in enumerate(example_cases(path)):
            yield pytest.param(path, n, case, id=f"{name}-{n}")


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


# --- the examples themselves (no parser needed) ------------------------------


def test_enough_examples_and_numpy_equivalents():
    names = {p.stem for p in PATHS}
    assert len(names) >= 24, sorted(names)
    covered = names & set(NUMPY)
    assert len(covered) >= 20, sorted(covered)
    assert set(NUMPY) <= names, sorted(set(NUMPY) - names)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_example_header_comments(path):
    lines = path.read_text().splitlines()
    assert lines[0].startswith("//"), "an example starts with `//` comment lines"
    assert any("Run:" in line for line in lines if line.lstrip().startswith("//"))
    cases = example_cases(path)
    assert len(cases) >= 2, "want a nice and an awkward `// dims:` line"
    header_dims = {d for _, dims in header_inputs(path.read_text()) if dims
                   for d in dims if isinstance(d, str)}
    for case in cases:
        assert set(case["dims"]) == header_dims, "each dims line names every header dimension"
        assert all(v >= 1 for v in case["dims"].values())
    # The awkward line has a size of 1 somewhere (in dims or a free-rank shape).
    assert any(1 in c["dims"].values() or any(1 in s for s in c["shapes"]) for c in cases[1:])


# --- reference interpreter vs numpy ------------------------------------------


@pytest.mark.parametrize("path, n, case", list(_cases()))
def test_reference_matches_numpy(path, n, case):
    name = path.stem
    program = tile.parse_file(str(path))
    rng = np.random.default_rng(zlib.crc32(f"{name}:{n}".encode()))
    arrays = make_inputs(program, case, rng, np.float64)
    for a, shape in zip(arrays, case["shapes"]):
        assert a.shape == tuple(shape)

    given = [a.copy() for a in arrays]
    got = _as_tuple(reference.run(program, *given))
    for a, b in zip(given, arrays):
        np.testing.assert_array_equal(a, b, err_msg=f"{name}: the reference changed an input")
    want = _as_tuple(NUMPY[name](*[a.copy() for a in arrays]))
    outputs = list(program.outputs)
    assert len(got) == len(want) == len(outputs)
    for out, g, w in zip(outputs, got, want):
        g = np.asarray(g)
        w = np.asarray(w)
        msg = f"{name} output {out} with dims {case['dims']}"
        assert g.shape == w.shape, f"{msg}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{msg}: dtype {g.dtype} != {w.dtype}"
        if name in INEXACT:
            np.testing.assert_allclose(g, w, err_msg=msg, **TOLERANCE)
        else:
            np.testing.assert_array_equal(g, w, err_msg=msg)
