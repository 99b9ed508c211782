"""The module itself: build facts, threads, presets, the error type."""

import json
import pytest

import hymba


def test_build_info_says_python_bindings_are_built():
    info = hymba.build_info()
    assert info["python_bindings"] is True
    assert info["version"] == hymba.__version__
    assert info["build_type"] in ("release", "debug")


def test_build_info_matches_the_cli(cli):
    import json
    assert json.loads(cli("info", "--json").stdout)["build"]["python_bindings"] is True


def test_set_threads():
    hymba.set_threads(1)
    assert hymba.num_threads() == 1
    assert hymba.build_info()["threads"] == 1
    hymba.set_threads(2)
    assert hymba.num_threads() == 2
    with pytest.raises(hymba.HymbaError, match="--threads must be >= 0"):
        hymba.set_threads(-1)


def test_presets():
    tiny = {p["name"]: p for p in hymba.presets("tiny")}
    seed = {p["name"]: p for p in hymba.presets()}
    assert "hybrid-official" in tiny and len(seed) > 10
    p = tiny["hybrid-official"]
    assert set(p) >= {"name", "title", "family", "description", "params", "config"}
    assert 0 < p["params"] < seed["hybrid-official"]["params"]
    with pytest.raises(hymba.HymbaError, match="--scale"):
        hymba.presets("huge")


def test_error_type_is_a_value_error():
    assert issubclass(hymba.HymbaError, ValueError)


def test_openblas_kernels_match_the_cli(cli):
    """The extension and the `hymba` commands it runs use the same OpenBLAS
    kernels (hymba/__init__.py), so their float32 results agree bit for bit."""
    here = hymba.build_info()["blas_core"]
    there = json.loads(cli("info", "--json").stdout)["build"]["blas_core"]
    assert here and here == there


def test_openmp_waits_passively_as_the_cli_does():
    """Imported first, hymba sets OpenMP's passive wait policy, as the command
    does (a user's OMP_WAIT_POLICY stands)."""
    import os
    import subprocess
    import sys

    code = "import hymba; print(hymba.build_info()['omp_wait_policy'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "passive"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "active"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "active"
