"""JSON documents in the cache (polytile.runtime.json_cache): round trip, atomic writes, a damaged or
foreign document reads as a miss and is removed, namespaces and keys are isolated, the kernel cache's
trust checks apply."""
from __future__ import annotations

import json
import os

import pytest

from polytile import config, runtime
from polytile.errors import CacheError
from polytile.runtime import cache as cache_mod
from polytile.runtime import json_cache

DOC = {"a": 1, "b": [1.5, None, "x"], "nested": {"z": True, "y": -0.0}, "unicode": "t\u00e9st"}
KEY = "0123456789abcdef" * 4


@pytest.fixture
def cache(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    return d


def test_round_trip(cache):
    assert runtime.json_get("tune", KEY, cache) is None
    path = runtime.json_put("tune", KEY, DOC, cache)
    assert path == runtime.json_path("tune", KEY, cache) == cache / "tune" / f"{KEY}.json"
    assert runtime.json_get("tune", KEY, cache) == DOC
    # Overwriting replaces the document.
    runtime.json_put("tune", KEY, {"v": 2}, cache)
    assert runtime.json_get("tune", KEY, cache) == {"v": 2}


def test_default_root_is_the_configured_cache_dir(cache):
    with config.override(cache_dir=cache):
        runtime.json_put("opt", "k1", {"x": 1})
        assert runtime.json_path("opt", "k1") == cache / "opt" / "k1.json"
        assert runtime.json_get("opt", "k1") == {"x": 1}


def test_layout_and_permissions(cache):
    path = runtime.json_put("tune", KEY, DOC, cache)
    assert os.stat(path.parent).st_mode & 0o777 == 0o755
    assert os.stat(path).st_mode & 0o777 == 0o644
    data = json.loads(path.read_text())
    assert data["key"] == KEY and data["namespace"] == "tune" and data["doc"] == DOC


def test_atomic_write_leaves_no_temporary_files(cache):
    for k in range(5):
        runtime.json_put("tune", KEY, {"k": k}, cache)
    assert sorted(p.name for p in (cache / "tune").iterdir()) == [f"{KEY}.json"]


def test_failed_write_leaves_nothing(cache):
    with pytest.raises(TypeError):
        runtime.json_put("tune", KEY, {"not json": object()}, cache)
    assert not (cache / "tune").exists() or not any((cache / "tune").iterdir())
    with pytest.raises(TypeError):
        runtime.json_put("tune", KEY, ["a", "list"], cache)


@pytest.mark.parametrize("damage", ["garbage", "truncate", "empty", "flip", "not-an-object", "old-format"])
def test_corrupt_file_is_a_miss_and_removed(cache, damage):
    path = runtime.json_put("tune", KEY, DOC, cache)
    text = path.read_text()
    if damage == "garbage":
        path.write_text("{ not json")
    elif damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "empty":
        path.write_text("")
    elif damage == "flip":  # still valid JSON, but not what was written
        path.write_text(text.replace('"a": 1', '"a": 7'))
    elif damage == "not-an-object":
        path.write_text("[1, 2]")
    else:  # a bare document, as tune wrote it before the envelope
        path.write_text(json.dumps(DOC))
    assert runtime.json_get("tune", KEY, cache) is None
    assert not path.exists()
    # The next write repairs it.
    runtime.json_put("tune", KEY, DOC, cache)
    assert runtime.json_get("tune", KEY, cache) == DOC


def test_namespace_and_key_isolation(cache):
    runtime.json_put("tune", KEY, {"from": "tune"}, cache)
    runtime.json_put("opt", KEY, {"from": "opt"}, cache)
    runtime.json_put("tune", "other", {"from": "tune/other"}, cache)
    assert runtime.json_get("tune", KEY, cache) == {"from": "tune"}
    assert runtime.json_get("opt", KEY, cache) == {"from": "opt"}
    assert runtime.json_get("tune", "other", cache) == {"from": "tune/other"}
    assert runtime.json_get("opt", "other", cache) is None
    # A document copied to another namespace or key is refused (and removed).
    (cache / "opt" / "copied.json").write_bytes((cache / "tune" / f"{KEY}.json").read_bytes())
    assert runtime.json_get("opt", "copied", cache) is None
    (cache / "tune" / "moved.json").write_bytes((cache / "opt" / f"{KEY}.json").read_bytes())
    assert runtime.json_get("tune", "moved", cache) is None
    assert not (cache / "opt" / "copied.json").exists() and not (cache / "tune" / "moved.json").exists()


@pytest.mark.parametrize("namespace, key", [("Tune", "k"), ("ab", "k"), ("a/b", "k"), ("", "k"), ("tune", "../x"),
                                            ("tune", ".hidden"), ("tune", "a.b"), ("tune", ""), ("tune", "k" * 129)])
def test_bad_names_are_refused(cache, namespace, key):
    with pytest.raises(ValueError):
        runtime.json_path(namespace, key, cache)
    with pytest.raises(ValueError):
        runtime.json_put(namespace, key, DOC, cache)
    with pytest.raises(ValueError):
        runtime.json_get(namespace, key, cache)


def test_symlinked_document_is_not_followed(cache, tmp_path):
    outside = tmp_path / "outside.json"
    runtime.json_put("tune", KEY, DOC, cache)
    outside.write_bytes((cache / "tune" / f"{KEY}.json").read_bytes())
    (cache / "tune" / f"{KEY}.json").unlink()
    (cache / "tune" / f"{KEY}.json").symlink_to(outside)
    assert runtime.json_get("tune", KEY, cache) is None
    assert outside.exists(), "removing the bad entry must remove the link, not its target"


def test_unsafe_namespace_directory_is_ignored_then_replaced(cache):
    runtime.json_put("tune", KEY, DOC, cache)
    os.chmod(cache / "tune", 0o777)
    assert runtime.json_get("tune", KEY, cache) is None
    runtime.json_put("tune", KEY, {"v": 2}, cache)
    assert os.stat(cache / "tune").st_mode & 0o777 == 0o755
    assert runtime.json_get("tune", KEY, cache) == {"v": 2}


def test_untrusted_root_is_refused(cache):
    os.chmod(cache, 0o777)
    try:
        with pytest.raises(CacheError, match="writable by others"):
            runtime.json_get("tune", KEY, cache)
        with pytest.raises(CacheError, match="writable by others"):
            runtime.json_put("tune", KEY, DOC, cache)
    finally:
        os.chmod(cache, 0o700)


def test_another_users_cache_is_refused(cache, monkeypatch):
    runtime.json_put("tune", KEY, DOC, cache)
    monkeypatch.setattr(cache_mod, "_euid", lambda: os.geteuid() + 1)  # pretend to be someone else
    with pytest.raises(CacheError, match="not to you"):
        runtime.json_get("tune", KEY, cache)


def test_counts_verify_and_kernels_untouched(cache):
    runtime.json_put("tune", "a", {"x": 1}, cache)
    runtime.json_put("tune", "b", {"x": 2}, cache)
    runtime.json_put("opt", "c", {"x": 3}, cache)
    (cache / "tune" / "a.interrupted.json").write_text("{}")  # tune's saved schedule: not a document
    stale = cache / "tune" / ".b.json.dead.tmp"
    stale.write_text("half")
    os.utime(stale, (0, 0))
    (cache / "tune" / "b.json").write_text("{ damaged")
    assert runtime.json_counts(cache) == {"opt": 1, "tune": 2}
    found = runtime.json_verify(cache)
    problems = {e.path.name: e.problem for e in found}
    assert problems["a.json"] is None and problems["c.json"] is None and "not JSON" in problems["b.json"]
    assert "a.interrupted.json" not in problems
    assert not (cache / "tune" / "b.json").exists() and not stale.exists()
    assert (cache / "tune" / "a.interrupted.json").exists()
    assert runtime.json_counts(cache) == {"opt": 1, "tune": 1}
    # Namespaces are not kernels: the kernel cache's verify leaves them alone.
    assert runtime.verify(cache) == []
    assert runtime.json_get("tune", "a", cache) == {"x": 1}
    assert runtime.info(cache)["tune_results"] == 2  # both .json files under tune/, as before
    runtime.clear(cache)
    assert runtime.json_counts(cache) == {}


def test_module_doc_example():
    assert json_cache.json_path("tune", "ab12", "/c").as_posix() == "/c/tune/ab12.json"


def test_cache_command_counts_and_verifies_documents(cache, monkeypatch, capsys):
    from polytile.cli import main as cli_main

    monkeypatch.setenv("POLYTILE_CACHE_DIR", str(cache))
    runtime.json_put("tune", "good", {"x": 1}, cache)
    runtime.json_put("opt", "k1", {"text": "int x;"}, cache)
    bad = runtime.json_put("opt", "k2", {"text": "int y;"}, cache)
    bad.write_text(bad.read_text()[:-5])  # truncated
    with config.override(cache_dir=cache):
        assert cli_main(["cache", "info"]) == 0
        out = capsys.readouterr().out
        assert "tune       1 saved tuning result(s)" in out and "opt        2 saved optimiser result(s)" in out
        assert cli_main(["cache", "verify"]) == 0
        out = capsys.readouterr().out
        assert f"removed {bad}" in out and "1 bad" in out and not bad.exists()
    assert runtime.json_get("opt", "k1", cache) == {"text": "int x;"}
