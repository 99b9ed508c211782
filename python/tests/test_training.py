"""Training from Python: the loss falls, callbacks see every step, Ctrl-C
(KeyboardInterrupt) stops at the next step with a checkpoint that resumes."""

import os
import signal

import pytest

import hymba
from conftest import TEXT

RECIPE = dict(batch=4, seq_len=32, lr=3e-3, warmup=2, eval_interval=10, eval_windows=4, progress=False)


def test_finetune_lowers_the_loss(workdir, tmp_path):
    lm = hymba.LanguageModel.load(workdir / "ck")
    before = lm.score(TEXT)["loss"]
    seen = []
    s = lm.finetune(workdir / "train.txt", tmp_path / "run", steps=30, callback=seen.append, **RECIPE)
    after = lm.score(TEXT)["loss"]
    assert after < before - 0.3, (before, after)
    assert s["steps"] == 30 and s["out"] == str(tmp_path / "run")
    assert [r["step"] for r in seen] == list(range(1, 31)) and all(r["steps"] == 30 for r in seen)
    assert [r["step"] for r in seen if "val_loss" in r] == [10, 20, 30]
    # metrics.jsonl as a list of dicts: step records and evaluations.
    assert [m["step"] for m in s["metrics"] if "val_loss" in m] == [10, 20, 30]
    assert s["best_val_loss"] == min(m["val_loss"] for m in s["metrics"] if "val_loss" in m)
    assert lm.source.startswith(str(tmp_path / "run"))  # now the run's latest checkpoint


def test_train_from_a_preset(workdir, tmp_path, capfd):
    s = hymba.train("hybrid-official", workdir / "train.txt", tmp_path / "t", scale="tiny", steps=20,
                    **dict(RECIPE, progress=True))
    losses = [m["loss"] for m in s["metrics"] if "loss" in m]
    assert s["steps"] == 20 and losses[-1] < losses[0]
    assert os.path.isdir(tmp_path / "t" / "ckpt-20")
    assert "20/20" in capfd.readouterr().err  # the progress bar (tqdm) or line
    with pytest.raises(hymba.HymbaError, match="already holds a run"):
        hymba.train("hybrid-official", workdir / "train.txt", tmp_path / "t", steps=20, **RECIPE)
    with pytest.raises(hymba.HymbaError, match="unknown option 'stepz'"):
        hymba.train("hybrid-official", workdir / "train.txt", tmp_path / "u", stepz=3)


def test_recipe_keys_reach_the_run(workdir, tmp_path):
    s = hymba.train("mamba-only", workdir / "train.txt", tmp_path / "w", scale="tiny", steps=2,
                    weight_decay_scope="all", recompute=True, **RECIPE)
    assert s["steps"] == 2
    state = (tmp_path / "w" / (tmp_path / "w" / "latest").read_text().strip() / "train_state.json").read_text()
    assert '"weight_decay_scope":"all"' in state.replace(" ", "")
    with pytest.raises(hymba.HymbaError, match="precision: must be 'f32' or 'bf16'"):
        hymba.train("mamba-only", workdir / "train.txt", tmp_path / "p", scale="tiny", steps=2, precision="fp16",
                    **RECIPE)


def test_train_from_a_config_dict(workdir, tmp_path):
    config = hymba.LanguageModel.create("mamba-only", scale="tiny").config
    del config["vocab_size"]
    s = hymba.train(config, workdir / "train.txt", tmp_path / "c", steps=3, **RECIPE)
    assert s["steps"] == 3


def test_ctrl_c_stops_at_the_next_step_with_a_checkpoint(workdir, tmp_path):
    lm = hymba.LanguageModel.load(workdir / "ck")
    steps = []

    def press_ctrl_c_at_step_3(r):
        steps.append(r["step"])
        if r["step"] == 3:
            os.kill(os.getpid(), signal.SIGINT)  # as a notebook's interrupt does

    with pytest.raises(KeyboardInterrupt, match="stopped after step 3 of 40 and saved") as e:
        lm.finetune(workdir / "train.txt", tmp_path / "run", steps=40, callback=press_ctrl_c_at_step_3, **RECIPE)
    assert "ckpt-3" in str(e.value)
    assert steps == [1, 2, 3]
    assert os.path.isdir(tmp_path / "run" / "ckpt-3")
    # The run resumes from there to the end.
    s = hymba.LanguageModel.load(workdir / "ck").finetune(workdir / "train.txt", tmp_path / "run", steps=40,
                                                          resume=True, **RECIPE)
    assert s["steps"] == 40


def test_a_callback_error_stops_the_run_and_is_raised(workdir, tmp_path):
    class Enough(Exception):
        pass

    def stop_at_2(r):
        if r["step"] == 2:
            raise Enough("stop")

    with pytest.raises(Enough):
        hymba.train("mamba-only", workdir / "train.txt", tmp_path / "r", steps=10, callback=stop_at_2, **RECIPE)
    assert os.path.isdir(tmp_path / "r" / "ckpt-2")


def test_sigint_while_the_engine_runs_a_step(workdir, tmp_path):
    # Ctrl-C lands while the trainer holds no GIL: Python's handler only
    # notes it, and the trainer's check after the step raises it.
    import re
    import threading
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            hymba.train("hybrid-official", workdir / "train.txt", tmp_path / "long", steps=5000, **RECIPE)
    finally:
        timer.cancel()
    step = int(re.search(r"stopped after step (\d+) of 5000", str(e.value)).group(1))
    assert 1 <= step < 5000 and os.path.isdir(tmp_path / "long" / f"ckpt-{step}")
