"""Session-wide test setup.

* Every compiled kernel of the test session goes to a fresh temporary cache
  directory, never to ``~/.cache/polytile``: the directory is set both in the
  process-wide config (``polytile.config.override``) and in the environment
  (``POLYTILE_CACHE_DIR``) so that subprocesses started by tests inherit it.
* ``rng``: a numpy Generator seeded from the test's node id, so every test
  draws the same data on every run and in any order.
* Hypothesis: profile ``ci`` (modest ``max_examples``, derandomized so every
  run draws the same examples, no deadline since a compile is a C compiler
  call) is loaded unless ``HYPOTHESIS_PROFILE`` names another one (``dev``:
  300 random examples per test, for hunting bugs).
"""
from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

# Test modules import helpers as top-level modules (`from numpy_programs import ...`).
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra; only test_properties needs it
    settings = None

if settings is not None:
    settings.register_profile(
        "ci",
        max_examples=50,
        derandomize=True,  # the same examples on every run: CI results do not depend on luck
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
    settings.register_profile(
        "dev",
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session", autouse=True)
def polytile_cache_dir(tmp_path_factory):
    """A private kernel cache for the whole session (config and environment)."""
    from polytile import config

    cache = tmp_path_factory.mktemp("polytile-cache")
    old_env = os.environ.get("POLYTILE_CACHE_DIR")
    os.environ["POLYTILE_CACHE_DIR"] = str(cache)
    try:
        with config.override(cache_dir=cache):
            yield cache
    finally:
        if old_env is None:
            os.environ.pop("POLYTILE_CACHE_DIR", None)
        else:
            os.environ["POLYTILE_CACHE_DIR"] = old_env


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A Generator seeded from the test's node id (stable across runs and orderings)."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
