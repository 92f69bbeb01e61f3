"""The specialization cache and the lean call path (polytile.kernel, specialization.Launcher).

A signature compiled once is found by a later process without the pipeline or islpy; damaged
documents and libraries are rebuilt, never loaded; keys change with everything that decides the
code; eviction keeps the cache bounded; ``out=`` writes into checked arrays.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polytile
from polytile import config, kernel, runtime
from polytile.errors import ShapeError
from polytile.options import Options
from polytile.program import load_program

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = "function (A[N]) -> (B) { B = A * 2; }"
MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"
TWO = "function (A[N], B[N]) -> (S, D) { S = A + B; D = A - B; }"

# A child process: runs MATMUL on fixed integer inputs, checks it against numpy, reports whether islpy
# (or the pipeline) was imported, and which specialisation document it used.
CHILD = textwrap.dedent(f"""
    import json, sys
    import numpy as np
    import polytile
    k = polytile.compile({MATMUL!r})
    rng = np.random.default_rng(0)
    A = rng.integers(-4, 5, (7, 5)).astype(np.float32)
    B = rng.integers(-4, 5, (5, 3)).astype(np.float32)
    ok = bool((k(A, B) == A @ B).all())
    print(json.dumps({{"ok": ok, "islpy": "islpy" in sys.modules, "pipeline": "polytile.pipeline" in sys.modules}}))
""")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("POLYTILE_CACHE_DIR", str(d))
    with config.override(cache_dir=d):
        yield d


def run_child(cache_dir: Path, code: str = CHILD) -> dict:
    env = {**os.environ, "POLYTILE_CACHE_DIR": str(cache_dir)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def spec_documents(cache_dir: Path):
    return sorted((cache_dir / kernel.NAMESPACE).glob("*.json"))


def library_of(cache_dir: Path, doc: Path) -> Path:
    d = json.loads(doc.read_text())["doc"]
    return cache_dir / d["entry"][:2] / d["entry"] / f"lib{d['name']}.so"


def rewrite(doc: Path, **changes) -> None:
    """Change a stored document and re-sign it (as someone with write access to the cache could)."""
    from polytile.runtime import json_cache

    env = json.loads(doc.read_text())
    env["doc"].update(changes)
    env["sha256"] = json_cache._digest(env["doc"])
    doc.write_text(json.dumps(env))


def test_a_later_process_runs_a_cached_kernel_without_islpy(cache_dir):
    first = run_child(cache_dir)
    assert first == {"ok": True, "islpy": True, "pipeline": True}
    assert len(spec_documents(cache_dir)) == 1
    second = run_child(cache_dir)
    assert second == {"ok": True, "islpy": False, "pipeline": False}


def test_a_damaged_document_is_discarded_and_rebuilt(cache_dir):
    run_child(cache_dir)
    (doc,) = spec_documents(cache_dir)
    text = doc.read_text()
    doc.write_text(text.replace('"entry"', '"entrx"'))  # the digest no longer matches
    assert run_child(cache_dir) == {"ok": True, "islpy": True, "pipeline": True}
    assert run_child(cache_dir)["islpy"] is False  # stored again, whole


def test_a_damaged_library_is_not_loaded_but_rebuilt(cache_dir):
    run_child(cache_dir)
    (doc,) = spec_documents(cache_dir)
    lib = library_of(cache_dir, doc)
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF
    lib.write_bytes(bytes(data))
    assert run_child(cache_dir) == {"ok": True, "islpy": True, "pipeline": True}
    assert run_child(cache_dir) == {"ok": True, "islpy": False, "pipeline": False}


@pytest.mark.parametrize("entry, name", [
    ("../../tmp", "x"),                 # not a key
    ("0" * 64, "../x"),                 # not a name
    ("f" * 64, "matmul"),               # a key with no entry
])
def test_a_document_naming_anything_but_a_checked_entry_is_not_loaded(cache_dir, entry, name):
    run_child(cache_dir)
    (doc,) = spec_documents(cache_dir)
    rewrite(doc, entry=entry, name=name)
    assert run_child(cache_dir) == {"ok": True, "islpy": True, "pipeline": True}


def test_a_library_reached_through_a_symbolic_link_is_not_loaded(cache_dir, tmp_path):
    run_child(cache_dir)
    (doc,) = spec_documents(cache_dir)
    lib = library_of(cache_dir, doc)
    # Move the entry elsewhere and leave a symbolic link in its place: the checks refuse it.
    elsewhere = tmp_path / "elsewhere"
    lib.parent.rename(elsewhere)
    lib.parent.symlink_to(elsewhere, target_is_directory=True)
    assert run_child(cache_dir) == {"ok": True, "islpy": True, "pipeline": True}


def test_a_change_of_polytile_code_is_a_new_key(cache_dir, monkeypatch):
    from polytile import version

    p = load_program(DOUBLE)
    before = kernel.specialization_key(p, [(4,)], ["float32"], {}, Options.make(hardware=None))
    monkeypatch.setattr(version, "_fingerprint", "0" * 64)
    assert kernel.specialization_key(p, [(4,)], ["float32"], {}, Options.make(hardware=None)) != before


def test_an_evicted_library_is_compiled_again(cache_dir):
    run_child(cache_dir)
    assert runtime.evict(0, cache_dir) > 0
    assert run_child(cache_dir) == {"ok": True, "islpy": True, "pipeline": True}


def test_concurrent_processes_agree(cache_dir):
    env = {**os.environ, "POLYTILE_CACHE_DIR": str(cache_dir)}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["ok"]
    assert len(spec_documents(cache_dir)) == 1
    assert run_child(cache_dir)["islpy"] is False


def test_the_key_changes_with_everything_that_decides_the_code(cache_dir):
    p = load_program(MATMUL)
    base = dict(shapes=[(4, 3), (3, 2)], dtypes=["float32", "float32"], sizes={}, options=Options.make())

    def key(**change):
        kw = {**base, **change}
        return kernel.specialization_key(p, kw["shapes"], kw["dtypes"], kw["sizes"], kw["options"])

    k0 = key()
    assert key() == k0
    variants = [
        key(shapes=[(4, 3), (3, 5)]),
        key(dtypes=["float64", "float64"]),
        key(options=Options.make(parallel=False)),
        key(options=Options.make(hardware="x86-avx2")),
        key(options=Options.make(hardware=None)),
        key(options=Options.make(cflags=["-O2", "-fPIC", "-shared"])),
        key(options=Options.make(fusion="max")),
        key(options=Options.make(min_parallel_work=0)),
        kernel.specialization_key(load_program(MATMUL.replace("+(", ">(")), base["shapes"], base["dtypes"], {},
                                  base["options"]),
    ]
    with config.override(cflags=("-O1", "-fopenmp", "-fPIC", "-shared")):
        variants.append(key())
    assert len({k0, *variants}) == len(variants) + 1


def test_eviction_removes_the_least_recently_used(cache_dir):
    paths = [runtime.build(f"int f{i}(void) {{ return {i}; }}", name_hint=f"f{i}") for i in range(3)]
    for i, p in enumerate(paths):  # f0 used last, f1 least recently
        os.utime(runtime.manifest_path(p), (1000 + (i if i else 10), 1000 + (i if i else 10)))
    one = sum(f.stat().st_size for f in paths[0].parent.iterdir())
    runtime.evict(2 * one + one // 2, cache_dir)
    assert [p.exists() for p in paths] == [True, False, True]
    with config.override(cache_max_bytes=1):  # every build evicts all but itself
        last = runtime.build("int g(void) { return 7; }", name_hint="g")
    assert last.exists() and not any(p.exists() for p in paths)


def test_out_writes_into_the_given_arrays(cache_dir):
    k = polytile.compile(MATMUL)
    A = np.arange(12, dtype=np.float32).reshape(4, 3)
    B = np.arange(6, dtype=np.float32).reshape(3, 2)
    C = np.full((4, 2), 99.0, np.float32)
    assert k(A, B, out=C) is C
    np.testing.assert_array_equal(C, A @ B)
    k2 = polytile.compile(TWO)
    a, b = np.arange(5.0), np.ones(5)
    S, D = np.empty(5), np.empty(5)
    got = k2(a, b, out=(S, D))
    assert got[0] is S and got[1] is D
    np.testing.assert_array_equal(S, a + b)
    np.testing.assert_array_equal(D, a - b)


@pytest.mark.parametrize("bad, words", [
    (np.empty((4, 3), np.float32), "expected float32[4, 2]"),
    (np.empty((4, 2), np.float64), "expected float32[4, 2]"),
    (np.empty((2, 4), np.float32).T, "C-contiguous"),
    ([[0.0] * 2] * 4, "numpy array"),
])
def test_a_wrong_out_is_a_user_error(cache_dir, bad, words):
    k = polytile.compile(MATMUL)
    A, B = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(ShapeError, match=re.escape(words)) as e:
        k(A, B, out=bad)
    assert isinstance(e.value, ValueError)


def test_an_out_overlapping_an_input_is_refused(cache_dir):
    k = polytile.compile(DOUBLE)
    A = np.arange(4, dtype=np.float32)
    with pytest.raises(ShapeError, match="overlaps"):
        k(A, out=A)
    with pytest.raises(ShapeError, match="one per output"):
        polytile.compile(TWO)(np.ones(3), np.ones(3), out=np.empty(3))


def test_an_input_called_out_is_an_input(cache_dir):
    k = polytile.compile("function (#out[N]) -> (B) { B = #out + 1; }")
    np.testing.assert_array_equal(k(out=np.zeros(3, np.float32)), np.ones(3, np.float32))


@pytest.mark.parametrize("make", [
    lambda a: a[::2],                                # strided view
    lambda a: a.astype(a.dtype.newbyteorder(">")),   # foreign byte order
    lambda a: a.tolist(),                            # a list
])
def test_inputs_the_lean_path_does_not_take_still_work(cache_dir, make):
    k = polytile.compile(DOUBLE)
    base = np.arange(8, dtype=np.float64)
    arg = make(base)
    want = np.asarray(arg, dtype=np.float64) * 2
    k(np.asarray(want / 2))  # the signature is known: the lean path is tried first
    np.testing.assert_array_equal(k(arg), want)


def test_a_wrong_shape_after_the_lean_path_is_a_user_error(cache_dir):
    k = polytile.compile(MATMUL)
    k(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    with pytest.raises(ShapeError):
        k(np.ones((2, 3), np.float32), np.ones((2, 4), np.float32))
    launcher = next(iter(k._launchers.values()))
    with pytest.raises(ShapeError, match=re.escape("input B: expected float32[3, 4], got float32[3, 5]")):
        launcher((np.ones((2, 3), np.float32), np.ones((3, 5), np.float32)))
    with pytest.raises(ShapeError, match="expected a numpy array, got list"):
        launcher(([[1.0] * 3] * 2, np.ones((3, 4), np.float32)))


class Duck:
    """An array-like that is not an ndarray (as pandas, xarray or cupy objects are): shape, dtype and
    flags like an array's, and __array__ for numpy."""

    def __init__(self, a):
        self._a = a
        self.shape, self.dtype, self.flags = a.shape, a.dtype, a.flags

    def __array__(self, dtype=None, copy=None):
        return self._a


def test_array_likes_never_take_the_lean_path(cache_dir):
    k = polytile.compile(DOUBLE)
    a = np.arange(5, dtype=np.float32)
    for _ in range(3):  # the second and third calls have a known signature
        np.testing.assert_array_equal(k(Duck(a)), a * 2)


def test_a_nan_constant_is_one_signature(cache_dir):
    k = polytile.compile("function (A[N], S) -> (B) { B = A + S; }")
    a = np.zeros(3, np.float32)
    for _ in range(3):
        assert np.isnan(k(a, float("nan"))).all()
    assert len(k._launchers) == 1
