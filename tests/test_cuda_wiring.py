"""The CUDA targets through the public API and the CLI (the backend itself: test_cuda.py)."""
import shutil

import numpy as np
import pytest

import polytile
from polytile.cli import main

MATMUL = "examples/matmul.tile"
NVCC = shutil.which("nvcc") or (shutil.which("/usr/local/cuda/bin/nvcc"))


def test_cuda_emulate_target_matches_the_oracle(rng):
    A = rng.integers(-4, 5, (37, 19)).astype(np.float32)
    B = rng.integers(-4, 5, (19, 45)).astype(np.float32)
    k = polytile.compile(MATMUL, target="cuda-emulate")
    np.testing.assert_array_equal(k(A, B), polytile.reference(MATMUL, A, B))
    text = k.describe_mapping(A, B)
    assert "blockIdx.x" in text and "sequential in each thread: k" in text


def test_describe_mapping_refuses_openmp():
    with pytest.raises(polytile.PolytileError, match="no GPU mapping"):
        polytile.compile(MATMUL).describe_mapping(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_cuda_target_builds_and_refuses_to_run_without_a_device():
    A = np.ones((8, 4), np.float32)
    B = np.ones((4, 16), np.float32)
    k = polytile.compile(MATMUL, target="cuda")
    src = k.source(A, B)
    assert "__global__" in src and 'extern "C"' in src
    if shutil.which("nvidia-smi") is None:
        with pytest.raises(polytile.PolytileError, match="no CUDA device"):
            k(A, B)


def test_cli_show_prints_the_gpu_mapping(capsys):
    assert main(["show", MATMUL, "--dims", "M=64,N=48,K=32", "--target", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "GPU mapping" in out and "grid (" in out and "block (" in out


def test_cli_run_cuda_emulate_check(capsys):
    assert main(["run", MATMUL, "--dims", "M=33,N=17,K=9", "--target", "cuda-emulate", "--check",
                 "--repeat", "1", "--warmup", "0"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_cli_compile_cuda_writes_a_cu_file(tmp_path, capsys):
    out = tmp_path / "k.cu"
    assert main(["compile", MATMUL, "--dims", "M=16,N=16,K=16", "--target", "cuda", "-o", str(out)]) == 0
    assert "__global__" in out.read_text()
