"""Tests of polytile.runtime: building, caching, loading and calling kernels."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from polytile import runtime
from polytile.config import override
from polytile.errors import CompilerError, InternalError, PolytileError

ADD1 = textwrap.dedent(
    """
    #include <stdint.h>
    /* Adds 1 to each of the n floats at x; n is a 0-d int64 array. */
    int add1(void *x_, void *n_) {
        float *x = (float *)x_;
        int64_t n = *(int64_t *)n_;
        for (int64_t i = 0; i < n; i++) x[i] += 1.0f;
        return 0;
    }
    """
)

FAIL_WITH_7 = "int fails(void *a0) { (void)a0; return 7; }\n"

# Portable, quick flags: -march=native and OpenMP are not needed to test the runtime.
FLAGS = ["-O1", "-fPIC", "-shared"]

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
pytestmark = needs_cc

REAL_CC = shutil.which("cc") or shutil.which("gcc")


def run_add1(so: Path) -> np.ndarray:
    x = np.arange(5, dtype=np.float32)
    runtime.load(so).function("add1", 2)(x, np.array(x.size, dtype=np.int64))
    return x


def write_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_build_load_call(tmp_path):
    so = runtime.build(ADD1, flags=FLAGS, cache_dir=tmp_path, name_hint="add1")
    assert so.name == "libadd1.so" and so.is_file()
    # Layout: <cache>/<key[:2]>/<key>/{add1.c, libadd1.so}
    key = so.parent.name
    assert len(key) == 64 and so.parent.parent.name == key[:2] and so.parent.parent.parent == tmp_path
    assert (so.parent / "add1.c").read_text() == ADD1
    np.testing.assert_array_equal(run_add1(so), np.arange(5, dtype=np.float32) + 1)


def test_config_defaults_are_used(tmp_path):
    with override(cache_dir=tmp_path, cflags=tuple(FLAGS), cc=REAL_CC):
        so = runtime.build(ADD1, name_hint="add1")
    assert tmp_path in so.parents


def test_cache_hit_does_not_invoke_compiler(tmp_path):
    # A wrapper at a fixed path, so the compiler path in the key stays the same
    # when we later swap the wrapper for one that cannot compile anything.
    wrapper = write_script(tmp_path / "mycc", f'exec "{REAL_CC}" "$@"\n')
    cache = tmp_path / "cache"
    before = (runtime.stats.compiles, runtime.stats.cache_hits)
    so1 = runtime.build(ADD1, flags=FLAGS, cc=str(wrapper), cache_dir=cache, name_hint="add1")
    assert (runtime.stats.compiles, runtime.stats.cache_hits) == (before[0] + 1, before[1])
    mtime = so1.stat().st_mtime_ns

    # Same --version answer (same key), but any compile attempt now fails.
    write_script(tmp_path / "mycc", f'[ "$1" = --version ] && exec "{REAL_CC}" --version\necho "must not compile" >&2\nexit 1\n')
    so2 = runtime.build(ADD1, flags=FLAGS, cc=str(wrapper), cache_dir=cache, name_hint="add1")
    assert so2 == so1 and so2.stat().st_mtime_ns == mtime
    assert (runtime.stats.compiles, runtime.stats.cache_hits) == (before[0] + 1, before[1] + 1)
    np.testing.assert_array_equal(run_add1(so2), np.arange(5, dtype=np.float32) + 1)

    # Sanity: the broken wrapper really is used on a miss.
    with pytest.raises(CompilerError, match="must not compile"):
        runtime.build(ADD1 + "\n", flags=FLAGS, cc=str(wrapper), cache_dir=cache, name_hint="add1")


def test_key_depends_on_source_flags_and_compiler(tmp_path):
    a = runtime.build(ADD1, flags=FLAGS, cache_dir=tmp_path, name_hint="add1")
    b = runtime.build(ADD1, flags=["-O2", "-fPIC", "-shared"], cache_dir=tmp_path, name_hint="add1")
    c = runtime.build(ADD1 + "/* changed */\n", flags=FLAGS, cache_dir=tmp_path, name_hint="add1")
    assert len({a.parent, b.parent, c.parent}) == 3
    k = runtime.cache_key(ADD1, "c", FLAGS, "/usr/bin/cc", "v1")
    assert k != runtime.cache_key(ADD1, "c", FLAGS, "/usr/bin/cc", "v2")
    assert k != runtime.cache_key(ADD1, "c", FLAGS, "/usr/bin/gcc", "v1")
    assert k != runtime.cache_key(ADD1, "cuda", FLAGS, "/usr/bin/cc", "v1")
    assert k == runtime.cache_key(ADD1, "c", list(FLAGS), "/usr/bin/cc", "v1")


CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from polytile import runtime
    src, cache = sys.argv[1], sys.argv[2]
    so = runtime.build(open(src).read(), flags={flags!r}, cache_dir=cache, name_hint="add1")
    x = np.arange(5, dtype=np.float32)
    runtime.load(so).function("add1", 2)(x, np.array(5, dtype=np.int64))
    assert (x == np.arange(5) + 1).all(), x
    print(so, runtime.stats.compiles)
    """
).format(flags=FLAGS)


def test_concurrent_builds_of_same_kernel(tmp_path):
    src = tmp_path / "add1_src.c"
    src.write_text(ADD1)
    for round_ in range(4):
        cache = tmp_path / f"cache{round_}"  # empty every round, so both must compile
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(src), str(cache)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
        for out, err, rc in results:
            assert rc == 0, err
        paths = {out.split()[0] for out, _, _ in results}
        assert len(paths) == 1
        # The key's lock makes the others wait for the first build and use it.
        assert sum(int(out.split()[1]) for out, _, _ in results) == 1
        so = Path(paths.pop())
        np.testing.assert_array_equal(run_add1(so), np.arange(5, dtype=np.float32) + 1)
        # Nothing half-done is left behind: only the source, the library and its manifest.
        assert sorted(p.name for p in so.parent.iterdir()) == ["add1.c", "libadd1.manifest.json", "libadd1.so"]


def test_compiler_failure_keeps_source(tmp_path):
    bad = "int broken(void *a0) { return undeclared_thing; }\n"
    with pytest.raises(CompilerError) as info:
        runtime.build(bad, flags=FLAGS, cache_dir=tmp_path, name_hint="broken")
    err = info.value
    assert "C compiler failed (exit" in str(err) and "broken" in str(err)
    assert "undeclared_thing" in str(err)  # the compiler's own diagnostic
    assert err.source_path and err.source_path in str(err)
    assert Path(err.source_path).read_text() == bad
    # No library and no temporary left in the key directory.
    assert [p.name for p in Path(err.source_path).parent.iterdir()] == ["broken.c"]


def test_missing_compiler(tmp_path):
    with pytest.raises(PolytileError, match="POLYTILE_CC") as info:
        runtime.build(ADD1, flags=FLAGS, cc=str(tmp_path / "no-such-cc"), cache_dir=tmp_path)
    assert "no-such-cc" in str(info.value)


def test_unwritable_cache_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(PolytileError, match="POLYTILE_CACHE_DIR"):
        runtime.build(ADD1, flags=FLAGS, cache_dir=blocker / "cache")


def test_hostile_name_hint_is_sanitized(tmp_path):
    assert runtime.sanitize_name("x; rm -rf /") == "x__rm__rf__"
    assert runtime.sanitize_name("") == "kernel"
    so = runtime.build(ADD1, flags=FLAGS, cache_dir=tmp_path, name_hint="x; rm -rf /")
    assert so.name == "libx__rm__rf__.so"
    assert so.parent.parent.parent == tmp_path
    np.testing.assert_array_equal(run_add1(so), np.arange(5, dtype=np.float32) + 1)


def test_compiler_version_is_first_line():
    v = runtime.compiler_version(REAL_CC)
    assert v and "\n" not in v
    assert runtime.compiler_version(REAL_CC) is v  # cached


def test_kernel_error_code_and_argument_checks(tmp_path):
    lib = runtime.load(runtime.build(FAIL_WITH_7 + ADD1, flags=FLAGS, cache_dir=tmp_path, name_hint="k"))
    assert runtime.load(lib.path) is lib  # one Library per path
    with pytest.raises(PolytileError, match="error code 7"):
        lib.function("fails", 1)(np.zeros(3))
    add1 = lib.function("add1", 2)
    assert lib.function("add1", 2) is add1
    n = np.array(3, dtype=np.int64)
    with pytest.raises(InternalError, match="C-contiguous"):
        add1(np.zeros((4, 4), dtype=np.float32)[:, 0], n)
    with pytest.raises(InternalError, match="takes 2"):
        add1(np.zeros(3, dtype=np.float32))
    with pytest.raises(InternalError, match="numpy"):
        add1([1.0, 2.0], n)
    with pytest.raises(InternalError, match="no function"):
        lib.function("nope", 1)
    # Writing through a 0-d array (scalar outputs use these).
    lib2 = runtime.load(
        runtime.build(
            "int setv(void *a0) { *(double *)a0 = 2.5; return 0; }\n", flags=FLAGS, cache_dir=tmp_path, name_hint="setv"
        )
    )
    s = np.array(0.0)
    lib2.function("setv", 1)(s)
    assert s[()] == 2.5


def test_unknown_language(tmp_path):
    with pytest.raises(PolytileError, match="language"):
        runtime.build(ADD1, lang="fortran", cache_dir=tmp_path)


def test_cuda_without_nvcc(tmp_path):
    with override(nvcc=None):
        with pytest.raises(PolytileError, match="POLYTILE_NVCC"):
            runtime.build("__global__ void k() {}", lang="cuda", cache_dir=tmp_path)


def test_debug_log_reports_cache_behaviour(tmp_path, capsys):
    with override(debug=1):
        runtime.build(ADD1, flags=FLAGS, cache_dir=tmp_path, name_hint="add1")
        runtime.build(ADD1, flags=FLAGS, cache_dir=tmp_path, name_hint="add1")
    err = capsys.readouterr().err
    assert "[polytile:runtime] compiling add1" in err
    assert "[polytile:runtime] cache hit" in err
