"""hymba.classify: a head trained on a tiny backbone learns a separable task;
its evaluation equals `hymba classify eval`."""

import json
import random

import pandas as pd
import pytest

import hymba


def test_classify_train_and_evaluate(workdir, tmp_path, cli):
    random.seed(1)
    cats = ["the cat sat on the mat", "a cat is on a mat", "the cat sat", "cats and mats"]
    dogs = ["the dog sat on the log", "a dog is on a log", "the dog sat", "dogs and logs"]
    with open(tmp_path / "train.tsv", "w") as f:
        for _ in range(40):
            f.write("cat\t" + random.choice(cats) + "\n")
            f.write("dog\t" + random.choice(dogs) + "\n")
    s = hymba.classify.train(workdir / "ck", tmp_path / "train.tsv", tmp_path / "clf", steps=20, batch=8, lr=3e-3,
                             max_len=32, seed=3)
    assert s["classes"] == ["cat", "dog"] and s["mode"] == "frozen"
    assert s["metrics"]["accuracy"] > 0.9
    curve = pd.DataFrame(s["history"])
    assert curve["step"].iloc[-1] == 20
    e = hymba.classify.evaluate(tmp_path / "clf", tmp_path / "train.tsv", out=tmp_path / "ev")
    want = json.loads(cli("classify", "eval", "--classifier", str(tmp_path / "clf"), "--data",
                          str(tmp_path / "train.tsv"), "--out", str(tmp_path / "ev2"), "--json").stdout)
    assert e["metrics"] == want["metrics"]
    with pytest.raises(hymba.HymbaError, match="unknown option 'epochz'"):
        hymba.classify.train(workdir / "ck", tmp_path / "train.tsv", tmp_path / "x", epochz=1)
