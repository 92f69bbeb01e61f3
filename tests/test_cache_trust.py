"""The kernel cache's trust model (polytile.runtime.cache): a damaged, foreign or
unsafe entry is discarded and rebuilt, never loaded; an untrusted cache directory
is refused; concurrent and killed builds never leave an entry that is loaded.

Scenarios that would crash the process if the damaged library were loaded
(SIGBUS on a truncated one, SIGSEGV on flipped bytes, heap corruption from
another kernel's library) run in a subprocess, so a regression shows up as a
failed test with the child's exit status rather than a dead test run.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from polytile import runtime
from polytile.errors import CacheError, CacheWarning, PolytileEnvironmentError
from polytile.runtime import cache as cache_mod

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
pytestmark = needs_cc

REAL_CC = shutil.which("cc") or shutil.which("gcc")
FLAGS = ["-O1", "-fPIC", "-shared"]
ROOT = Path(__file__).resolve().parents[1]

ADD1 = textwrap.dedent(
    """
    #include <stdint.h>
    int add1(void *x_, void *n_) {
        float *x = (float *)x_;
        int64_t n = *(int64_t *)n_;
        for (int64_t i = 0; i < n; i++) x[i] += 1.0f;
        return 0;
    }
    """
)
# Another kernel of the same entry name: loaded in add1's place it would write 8x too far.
ADD1_OTHER = ADD1.replace("x[i] += 1.0f", "x[8 * i] += 1.0f")


@pytest.fixture
def cache(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    return d


def build(cache_dir, source=ADD1, name="add1", cc=None):
    return runtime.build(source, flags=FLAGS, cc=cc, cache_dir=cache_dir, name_hint=name)


CHILD = textwrap.dedent(
    """
    import sys, warnings
    import numpy as np
    from polytile import runtime
    cache = sys.argv[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open(sys.argv[2]) as f:
            source = f.read()
        so = runtime.build(source, flags={flags!r}, cache_dir=cache, name_hint="add1")
        x = np.arange(5, dtype=np.float32)
        runtime.load(so).function("add1", 2)(x, np.array(5, dtype=np.int64))
    assert (x == np.arange(5) + 1).all(), x
    for w in caught:
        print("WARNING", w.category.__name__, w.message)
    print("COMPILES", runtime.stats.compiles, "DISCARDED", runtime.stats.discarded)
    """
).format(flags=FLAGS)


def child_build(cache_dir: Path, tmp_path: Path):
    """Build (or find) add1 in a fresh process, call it, and report; returns (returncode, stdout, stderr)."""
    src = tmp_path / "add1_src.c"
    src.write_text(ADD1)
    p = subprocess.run([sys.executable, "-c", CHILD, str(cache_dir), str(src)], capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def assert_rebuilt(cache_dir, tmp_path, reason):
    rc, out, err = child_build(cache_dir, tmp_path)
    # A negative return code is the signal that killed the child: the bad library was loaded.
    assert rc == 0, f"child exited {rc}\n{out}\n{err}"
    assert "COMPILES 1 DISCARDED 1" in out, out
    assert "CacheWarning" in out and reason in out, out
    # ... and the rebuilt entry is good: the next process just loads it.
    rc, out, err = child_build(cache_dir, tmp_path)
    assert rc == 0 and "COMPILES 0 DISCARDED 0" in out, out + err


# ---------------------------------------------------------------------------
# Damaged or foreign entries: discarded and rebuilt, never loaded
# ---------------------------------------------------------------------------


def test_manifest_written_with_library(cache):
    so = build(cache)
    man = json.loads(runtime.manifest_path(so).read_text())
    assert man["sha256"] == cache_mod.hashlib.sha256(so.read_bytes()).hexdigest()
    assert man["size"] == so.stat().st_size and man["key"] == so.parent.name and man["name"] == "add1"
    assert cache_mod.check_entry(so.parent, "add1") is None


def test_truncated_library_is_rebuilt(cache, tmp_path):
    so = build(cache)
    with open(so, "r+b") as f:
        f.truncate(so.stat().st_size // 3)
    assert_rebuilt(cache, tmp_path, "truncated")


def test_flipped_bytes_are_rebuilt(cache, tmp_path):
    so = build(cache)
    data = bytearray(so.read_bytes())
    for k in range(len(data) // 2, len(data) // 2 + 64):
        data[k] ^= 0xFF
    so.write_bytes(bytes(data))
    assert_rebuilt(cache, tmp_path, "sha256 does not match")


def test_other_kernels_library_with_its_manifest_is_rebuilt(cache, tmp_path):
    so = build(cache)
    other = build(cache, ADD1_OTHER)
    assert other != so
    shutil.copyfile(other, so)
    shutil.copyfile(runtime.manifest_path(other), runtime.manifest_path(so))
    assert_rebuilt(cache, tmp_path, "another key")


def test_other_kernels_library_alone_is_rebuilt(cache, tmp_path):
    so = build(cache)
    shutil.copyfile(build(cache, ADD1_OTHER), so)
    assert_rebuilt(cache, tmp_path, "manifest")


def test_libm_at_the_key_is_rebuilt(cache, tmp_path):
    import ctypes.util

    libm = ctypes.util.find_library("m")
    path = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                             "/lib64/libm.so.6", "/usr/lib/libm.so.6") if os.path.exists(p)), None)
    if path is None:
        pytest.skip(f"no libm file found ({libm})")
    so = build(cache)
    shutil.copyfile(path, so)
    assert_rebuilt(cache, tmp_path, "replaced")


def test_directory_at_the_key_is_rebuilt(cache, tmp_path):
    so = build(cache)
    so.unlink()
    so.mkdir()
    (so / "junk").write_text("x")
    assert_rebuilt(cache, tmp_path, "not a regular file")
    assert so.is_file()


def test_missing_manifest_is_rebuilt(cache, tmp_path):
    # What an older polytile left, or a build killed between the library and its manifest.
    so = build(cache)
    runtime.manifest_path(so).unlink()
    assert_rebuilt(cache, tmp_path, "no manifest")


def test_symlinked_library_is_not_followed(cache, tmp_path):
    so = build(cache)
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = outside / "libadd1.so"
    shutil.copyfile(build(cache, ADD1_OTHER), planted)
    so.unlink()
    so.symlink_to(planted)
    assert_rebuilt(cache, tmp_path, "symbolic link")
    assert planted.is_file(), "the link's target outside the cache must not be touched"
    assert not so.is_symlink()


def test_symlinked_key_directory_is_not_followed(cache, tmp_path):
    so = build(cache)
    kdir = so.parent
    outside = tmp_path / "elsewhere"
    shutil.copytree(kdir, outside)
    shutil.rmtree(kdir)
    kdir.symlink_to(outside, target_is_directory=True)
    assert_rebuilt(cache, tmp_path, "symbolic link")
    assert (outside / "libadd1.so").is_file() and not kdir.is_symlink()


def test_in_process_discard_warns_and_counts(cache):
    so = build(cache)
    so.write_bytes(b"\x7fELF not really")
    before = runtime.stats.discarded
    with pytest.warns(CacheWarning, match="discarding kernel cache entry .*libadd1.so"):
        so2 = build(cache)
    assert so2 == so and runtime.stats.discarded == before + 1
    x = np.arange(5, dtype=np.float32)
    runtime.load(so2).function("add1", 2)(x, np.array(5, dtype=np.int64))
    np.testing.assert_array_equal(x, np.arange(5) + 1)


def test_loader_refuses_a_library_changed_after_build(cache):
    so = build(cache, ADD1.replace("add1", "add1_late"), name="late")
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0x01
    so.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="sha256 does not match"):
        runtime.load(so)


def test_loader_refuses_cache_library_without_manifest(cache):
    from polytile.config import override

    so = build(cache, ADD1.replace("add1", "add1_nomani"), name="nomani")
    runtime.manifest_path(so).unlink()
    with override(cache_dir=cache):
        with pytest.raises(CacheError, match="no manifest"):
            runtime.load(so)


def test_loader_loads_users_own_library_outside_the_cache(tmp_path):
    src = tmp_path / "mine.c"
    src.write_text("int mine(void) { return 0; }\n")
    lib = tmp_path / "libmine.so"
    subprocess.run([REAL_CC, *FLAGS, "-o", str(lib), str(src)], check=True)
    runtime.load(lib).function("mine", 0)()


# ---------------------------------------------------------------------------
# The cache directory itself
# ---------------------------------------------------------------------------


def test_world_writable_cache_dir_is_refused(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(CacheError, match=r"writable by others \(mode 0777\).*chmod go-w") as info:
        build(d)
    assert isinstance(info.value, PolytileEnvironmentError)
    assert not any(d.iterdir()), "nothing may be written to (or loaded from) an untrusted directory"


def test_group_writable_cache_dir_is_refused(tmp_path):
    d = tmp_path / "grp"
    d.mkdir()
    d.chmod(0o770)
    with pytest.raises(CacheError, match="writable by its group"):
        build(d)


def test_cache_dir_of_another_user_is_refused(cache, monkeypatch):
    monkeypatch.setattr(cache_mod, "_euid", lambda: os.geteuid() + 12345)
    with pytest.raises(CacheError, match="belongs to .* not to you"):
        build(cache)


def test_entry_of_another_user_is_discarded(cache, monkeypatch):
    so = build(cache)
    real = os.geteuid()
    # The root is ours, but the entry's files look like someone else's.
    monkeypatch.setattr(cache_mod, "check_root", lambda root, create=True: Path(root))
    monkeypatch.setattr(cache_mod, "_euid", lambda: real + 1)
    assert "belongs to" in cache_mod.check_entry(so.parent, "add1")


def test_cache_file_instead_of_dir_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(CacheError, match="not a directory"):
        build(f)


def test_missing_cache_dir_is_created_private(tmp_path):
    d = tmp_path / "a" / "b" / "cache"
    build(d)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_symlinked_cache_root_is_checked_at_its_target(tmp_path):
    target = tmp_path / "real"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    so = build(link)
    assert so.is_file()
    target.chmod(0o777)
    with pytest.raises(CacheError, match="writable by others"):
        build(link)


def test_group_writable_umask_still_makes_trusted_entries(cache):
    old = os.umask(0o002)
    try:
        so = build(cache, ADD1 + "/* umask */\n")
    finally:
        os.umask(old)
    assert cache_mod.check_entry(so.parent, "add1") is None
    assert not so.parent.stat().st_mode & stat.S_IWGRP


# ---------------------------------------------------------------------------
# Concurrency and interruption
# ---------------------------------------------------------------------------


def _pool_build(args):
    cache_dir, n = args
    from polytile import runtime as rt

    so = rt.build(ADD1, flags=FLAGS, cache_dir=cache_dir, name_hint="add1")
    x = np.arange(n, dtype=np.float32)
    rt.load(so).function("add1", 2)(x, np.array(n, dtype=np.int64))
    return str(so), rt.stats.compiles, bool((x == np.arange(n) + 1).all())


def test_concurrent_processes_build_one_key_once(cache):
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters, like separate `polytile` runs
    with ctx.Pool(4) as pool:
        results = pool.map(_pool_build, [(str(cache), 7)] * 4)
    assert len({r[0] for r in results}) == 1
    assert all(r[2] for r in results)
    assert sum(r[1] for r in results) == 1, results  # one compile; the others waited on the key's lock
    so = Path(results[0][0])
    assert sorted(p.name for p in so.parent.iterdir()) == ["add1.c", "libadd1.manifest.json", "libadd1.so"]


SLOW_CC = """#!/bin/sh
# A compiler that, while {flag} exists, writes half a library and hangs (to be killed mid-build).
out=""
prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
if [ "$1" != "--version" ] && [ -e "{flag}" ] && [ -n "$out" ]; then
  head -c 3000 "{real}" > "$out"
  touch "{flag}.started"
  sleep 60
  exit 1
fi
exec "{real}" "$@"
"""

KILL_CHILD = """
import sys
from polytile import runtime
with open(sys.argv[2]) as f:
    source = f.read()
runtime.build(source, flags={flags!r}, cc=sys.argv[3], cache_dir=sys.argv[1], name_hint="add1")
""".format(flags=FLAGS)


def test_sigkill_mid_build_leaves_nothing_that_is_loaded(cache, tmp_path):
    flag = tmp_path / "slow"
    flag.write_text("")
    cc = tmp_path / "slowcc"
    cc.write_text(SLOW_CC.format(flag=flag, real=REAL_CC))
    cc.chmod(0o755)
    src = tmp_path / "add1_src.c"
    src.write_text(ADD1)
    p = subprocess.Popen([sys.executable, "-c", KILL_CHILD, str(cache), str(src), str(cc)],
                         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (tmp_path / "slow.started").exists():
            assert p.poll() is None and time.time() < deadline, "the build did not start"
            time.sleep(0.05)
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the child and its compiler, mid-build
        p.wait()
    libs = list(cache.rglob("lib*.so"))
    assert libs == [], f"a killed build left a library under its final name: {libs}"
    assert list(cache.rglob(".libadd1.*.tmp")), "expected the killed build's temporary file"
    # The next build (same compiler, so the same key) works and cleans up.
    flag.unlink()
    so = runtime.build(ADD1, flags=FLAGS, cc=str(cc), cache_dir=cache, name_hint="add1")
    x = np.arange(5, dtype=np.float32)
    runtime.load(so).function("add1", 2)(x, np.array(5, dtype=np.int64))
    np.testing.assert_array_equal(x, np.arange(5) + 1)
    assert not list(cache.rglob("*.tmp"))


# ---------------------------------------------------------------------------
# verify / clear / info, and the `polytile cache` command
# ---------------------------------------------------------------------------


def test_verify_reports_and_removes_bad_entries(cache):
    good = build(cache)
    bad = build(cache, ADD1_OTHER)
    with open(bad, "r+b") as f:
        f.truncate(100)
    found = runtime.verify(cache)
    problems = {e.path: e.problem for e in found}
    assert problems[good] is None and "truncated" in problems[bad]
    assert good.is_file() and not bad.exists() and not runtime.manifest_path(bad).exists()
    assert all(e.problem is None for e in runtime.verify(cache) if e.path.name.endswith(".so") and e.path.exists())


def test_info_and_clear(cache):
    build(cache)
    i = runtime.info(cache)
    assert i["dir"] == str(cache) and i["libraries"] == 1 and i["bytes"] > 0
    assert runtime.clear(cache) == i["bytes"]
    assert cache.is_dir() and not any(cache.iterdir())


def cli(*argv, cache_dir, env_extra=None):
    env = dict(os.environ, POLYTILE_CACHE_DIR=str(cache_dir), **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "polytile", *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_cache_command(cache):
    so = build(cache)
    bad = build(cache, ADD1_OTHER)
    bad.write_bytes(b"garbage")
    p = cli("cache", "info", cache_dir=cache)
    assert p.returncode == 0, p.stderr
    assert str(cache) in p.stdout and "libraries  2" in p.stdout
    p = cli("cache", "verify", cache_dir=cache)
    assert p.returncode == 0, p.stderr
    assert "removed" in p.stdout and str(bad) in p.stdout and "1 ok, 1 bad" in p.stdout
    assert so.is_file() and not bad.exists()
    p = cli("cache", "clear", cache_dir=cache)
    assert p.returncode == 0 and "removed" in p.stdout
    assert not any(cache.iterdir())


def test_cache_command_on_untrusted_dir_exits_3(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    p = cli("cache", "info", cache_dir=d)
    assert p.returncode == 3
    assert "writable by others" in p.stderr and "Traceback" not in p.stderr


def test_run_with_untrusted_cache_exits_3(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    p = cli("run", "examples/matmul.tile", "--dims", "M=4,N=4,K=4", "--repeat", "1", cache_dir=d)
    assert p.returncode == 3, p.stderr
    assert "polytile: error: the kernel cache directory" in p.stderr and "chmod go-w" in p.stderr
    assert "Traceback" not in p.stderr
