"""hymba.ablate and hymba.synth: rows load into pandas with the report's columns."""

import json

import pandas as pd
import pytest

import hymba
from conftest import TEXT


def test_ablate_rows_are_the_reports_table(tmp_path):
    (tmp_path / "corpus.txt").write_text((TEXT + "\n") * 12)
    suite = {"name": "micro", "title": "Micro suite", "scale": "tiny",
             "train": {"steps": 4, "batch": 2, "seq_len": 32, "eval_interval": 2, "eval_windows": 2, "lr": 3e-3,
                       "tokenizer": "byte", "seed": 7},
             "prompts": ["the "],
             "rows": [{"name": "Mamba", "preset": "mamba-only", "overrides": {"num_hidden_layers": 2}},
                      {"name": "Hybrid", "preset": "hybrid-official",
                       "overrides": {"num_hidden_layers": 2, "global_attn_idx": [0], "kv_reuse_group": "auto"}}]}
    (tmp_path / "suite.json").write_text(json.dumps(suite))
    rows = hymba.ablate(tmp_path / "suite.json", tmp_path / "out", data=tmp_path / "corpus.txt", sample_tokens=4,
                        cache_context=64, plots=False, steps=3)
    df = pd.DataFrame(rows)
    csv = pd.read_csv(tmp_path / "out" / "results.csv")
    assert list(df.columns) == list(csv.columns) == rows.columns
    assert list(df["model"]) == ["Mamba", "Hybrid"] and list(df["steps"]) == [3, 3]
    assert df["best_val_loss"].round(4).tolist() == csv["best_val_loss"].tolist()
    assert rows.report_md.endswith("report.md")
    # A rerun skips the measured rows and returns the same table.
    again = hymba.ablate(tmp_path / "suite.json", tmp_path / "out", data=tmp_path / "corpus.txt", sample_tokens=4,
                         cache_context=64, plots=False, steps=3)
    assert again.trained == 0 and pd.DataFrame(again).equals(df)
    with pytest.raises(hymba.HymbaError, match="unknown option 'stepz'"):
        hymba.ablate("demo", tmp_path / "x", stepz=3)


def test_synth_single_run_gives_epochs(tmp_path):
    seen = []
    rows = hymba.synth(task="selective-copying", model="mamba", epochs=2, num_train=32, num_test=8, seq_len=24,
                       vocab_size=8, num_tokens_to_copy=4, hidden_size=16, num_layers=1, callback=seen.append)
    df = pd.DataFrame(rows)
    assert list(df["epoch"]) == [1, 2] and len(seen) == 2
    assert {"train_loss", "eval_loss", "eval_acc", "eval_macro_acc", "lr", "seconds"} <= set(df.columns)
    with pytest.raises(hymba.HymbaError, match="unknown setting 'epochz'"):
        hymba.synth(task="selective-copying", epochz=2)


def test_synth_run_with_out_matches_its_csv(tmp_path):
    rows = hymba.synth(task="selective-copying", model="transformer", out=tmp_path / "s", plots=False, epochs=2,
                       num_train=32, num_test=8, seq_len=24, vocab_size=8, num_tokens_to_copy=4, hidden_size=16,
                       num_layers=1)
    csv = pd.read_csv(tmp_path / "s" / "results.csv")
    df = pd.DataFrame(rows)
    assert list(df.columns[:len(csv.columns)]) == list(csv.columns)
    assert df["eval_acc"].round(4).tolist() == csv["eval_acc"].tolist()
    assert len(rows[0]["curve"]) == 2


def test_synth_repeats_give_every_run_and_the_questions(tmp_path):
    suite = {"title": "t", "preset": "seed004-selective-copying",
             "task": {"seq_len": 12, "num_tokens_to_copy": 3, "vocab_size": 8},
             "train": {"epochs": 1, "num_train": 32, "num_test": 8, "batch_size": 16, "seed": 3},
             "model": {"hidden_size": 16, "num_heads": 2},
             "rows": [{"id": "m", "model": {"model": "mamba", "num_layers": 1}},
                      {"id": "t", "model": {"model": "transformer", "num_layers": 1}}],
             "questions": [{"question": "m beats t?", "claim": "better", "a": "m", "b": "t"}]}
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite))
    rows = hymba.synth(suite=path, out=tmp_path / "s", plots=False, repeats=2)
    assert len(rows) == 2 and len(rows.runs) == 4
    assert sorted((r["id"], r["repeat"], r["seed"]) for r in rows.runs) == [("m", 0, 3), ("m", 1, 4), ("t", 0, 3),
                                                                            ("t", 1, 4)]
    assert rows.questions[0]["n"] == 2 and rows.questions[0]["verdict"]
    with pytest.raises(hymba.HymbaError, match="repeats"):
        hymba.synth(task="selective-copying", model="mamba", repeats=2, epochs=1)
