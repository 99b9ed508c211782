"""Fixtures of the Python package's tests: the built `hymba` command the
package's results are compared with ($HYMBA_CLI, set by CTest), and a tiny
random model saved once per test module."""

import json
import os
import struct
import subprocess

import numpy as np
import pytest

import hymba

TEXT = ("the cat sat on the mat. the dog sat on the log. the cat and the dog sat on the mat and the log. "
        "a cat is on a mat; a dog is on a log. the cat sat. the dog sat. the mat and the log.")


def two_equal_blocks():
    """Two equal dataset blocks of 256 byte tokens: whichever `hymba eval`
    holds out, --split all is this text in order (tests/test_api.cpp)."""
    block = ""
    while len(block) < 256:
        block += TEXT
    block = block[:256]
    return block + block


@pytest.fixture(scope="session", autouse=True)
def two_threads():
    # Bit-identical results need the CLI's thread count (it runs with --threads 2).
    hymba.set_threads(2)


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("HYMBA_CLI")
    assert path and os.access(path, os.X_OK), "set HYMBA_CLI to the built hymba binary (CTest does)"

    def run(*args, check=True):
        r = subprocess.run([path, "--threads", "2", *args], capture_output=True, text=True, errors="replace")
        if check:
            assert r.returncode == 0, r.stderr
        return r

    return run


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hymba")
    lm = hymba.LanguageModel.create("hybrid-official", scale="tiny", seed=5)
    lm.save(d / "ck")
    (d / "text.txt").write_text(two_equal_blocks())
    (d / "train.txt").write_text((TEXT + "\n") * 6)
    return d


def read_safetensors(path):
    """name -> float32 array of a safetensors file (what `hymba forward` writes)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", t
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(t["shape"])
    return out
