"""Tests of polytile.config: reading the environment, overrides, debug_log."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from polytile import config
from polytile.config import DEFAULT_CFLAGS, Config, debug_log, get_config, override, set_config
from polytile.errors import PolytileError


def test_defaults():
    cfg = Config.from_env({})
    assert cfg.cache_dir == Path("~/.cache/polytile").expanduser()
    assert cfg.debug == 0
    assert cfg.cflags == DEFAULT_CFLAGS == ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fPIC", "-shared")
    assert cfg.num_threads is None
    expected_cc = "cc" if shutil.which("cc") else ("gcc" if shutil.which("gcc") else "cc")
    assert cfg.cc == expected_cc
    if shutil.which("nvcc"):
        assert cfg.nvcc == shutil.which("nvcc")
    elif os.path.exists("/usr/local/cuda/bin/nvcc"):
        assert cfg.nvcc == "/usr/local/cuda/bin/nvcc"
    else:
        assert cfg.nvcc is None


def test_each_variable(tmp_path):
    env = {
        "POLYTILE_CACHE_DIR": str(tmp_path / "c"),
        "POLYTILE_DEBUG": "3",
        "POLYTILE_CC": "/opt/my cc",
        "CC": "ignored-because-POLYTILE_CC-wins",
        "POLYTILE_CFLAGS": "-O2 -DNAME='a b' -fPIC -shared",
        "POLYTILE_NVCC": "/opt/cuda/nvcc",
        "POLYTILE_NUM_THREADS": "4",
    }
    cfg = Config.from_env(env)
    assert cfg.cache_dir == tmp_path / "c"
    assert cfg.debug == 3
    assert cfg.cc == "/opt/my cc"
    assert cfg.cflags == ("-O2", "-DNAME=a b", "-fPIC", "-shared")
    assert cfg.nvcc == "/opt/cuda/nvcc"
    assert cfg.num_threads == 4


def test_cc_falls_back_to_CC():
    assert Config.from_env({"CC": "clang"}).cc == "clang"
    assert Config.from_env({"CC": "clang", "POLYTILE_CC": ""}).cc == "clang"  # empty = unset


def test_cache_dir_tilde_expanded():
    assert Config.from_env({"POLYTILE_CACHE_DIR": "~/k"}).cache_dir == Path("~/k").expanduser()


@pytest.mark.parametrize("value", ["verbose", "-1", "4", "1.5"])
def test_invalid_debug(value):
    with pytest.raises(PolytileError, match="POLYTILE_DEBUG"):
        Config.from_env({"POLYTILE_DEBUG": value})


@pytest.mark.parametrize("value", ["0", "many", "-2"])
def test_invalid_num_threads(value):
    with pytest.raises(PolytileError, match="POLYTILE_NUM_THREADS"):
        Config.from_env({"POLYTILE_NUM_THREADS": value})


def test_unbalanced_cflags():
    with pytest.raises(PolytileError, match="POLYTILE_CFLAGS"):
        Config.from_env({"POLYTILE_CFLAGS": "-DX='oops"})


def test_get_config_is_computed_once(monkeypatch):
    previous = get_config()
    try:
        monkeypatch.setattr(config, "_current", None)
        monkeypatch.setenv("POLYTILE_DEBUG", "2")
        first = get_config()
        assert first.debug == 2
        monkeypatch.setenv("POLYTILE_DEBUG", "0")
        assert get_config() is first  # the environment is not re-read
    finally:
        set_config(previous)


def test_override_and_set_config(tmp_path):
    before = get_config()
    with override(debug=2, cache_dir=str(tmp_path), cflags=["-O0"]) as cfg:
        assert get_config() is cfg
        assert cfg.debug == 2 and cfg.cache_dir == tmp_path and cfg.cflags == ("-O0",)
        assert cfg.cc == before.cc
    assert get_config() is before
    with pytest.raises(RuntimeError):
        with override(debug=1):
            raise RuntimeError("restored even on error")
    assert get_config() is before
    with pytest.raises(PolytileError):
        with override(debug=9):
            pass
    assert get_config() is before
    with pytest.raises(TypeError):
        set_config("not a config")


def test_debug_log(capsys):
    with override(debug=1):
        debug_log(1, "parse", "three statements")
        debug_log(2, "parse", "hidden")
        debug_log(2, "parse", lambda: pytest.fail("must not be rendered"))
    with override(debug=2):
        debug_log(2, "schedule", lambda: "rendered lazily")
    with override(debug=0):
        debug_log(1, "parse", "hidden too")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "[polytile:parse] three statements\n[polytile:schedule] rendered lazily\n"


def test_bad_settings_are_environment_errors():
    from polytile.errors import ConfigError, PolytileEnvironmentError

    for env in ({"POLYTILE_DEBUG": "x"}, {"POLYTILE_DEBUG": "9"}, {"POLYTILE_CFLAGS": '"-O3'},
                {"POLYTILE_NUM_THREADS": "0"}):
        with pytest.raises(ConfigError) as info:
            Config.from_env(env)
        assert isinstance(info.value, PolytileEnvironmentError) and isinstance(info.value, ValueError)
        assert next(iter(env)) in str(info.value)
