"""hymba.train and the progress display shared with LanguageModel.finetune."""

import json
import os
import sys

from . import _hymba


def _metrics(out_dir):
    """metrics.jsonl of a run as a list of dicts (step records and eval records)."""
    path = os.path.join(out_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class _Progress:
    """A tqdm bar when tqdm is installed (notebooks get its widget), plain
    lines every log_interval steps otherwise, nothing when disabled."""

    def __init__(self, enabled, every):
        self.enabled = enabled
        self.every = max(1, int(every or 10))
        self.bar = None
        self.tqdm = None
        if enabled:
            try:
                from tqdm.auto import tqdm
                self.tqdm = tqdm
            except ImportError:
                pass

    def step(self, r):
        if not self.enabled:
            return
        if self.tqdm is not None:
            if self.bar is None:
                self.bar = self.tqdm(total=r["steps"], initial=r["step"] - 1, unit="step")
            self.bar.update(1)
            post = {"loss": f"{r['loss']:.4f}", "tok/s": f"{r['tokens_per_s']:.0f}"}
            if "val_loss" in r:
                post["val"] = f"{r['val_loss']:.4f}"
            self.bar.set_postfix(post, refresh=False)
        elif r["step"] % self.every == 0 or r["step"] == r["steps"] or "val_loss" in r:
            line = (f"step {r['step']}/{r['steps']}  loss {r['loss']:.4f}  lr {r['lr']:.3g}  "
                    f"{r['tokens_per_s']:.0f} tok/s")
            if "val_loss" in r:
                line += f"  val loss {r['val_loss']:.4f} ppl {r['val_ppl']:.2f}"
            print(line, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _run_training(call, options, callback, progress):
    """Runs call(hook) (the engine's trainer) with progress and the user's callback."""
    shown = _Progress(progress, options.get("log_interval"))

    def hook(record):
        shown.step(record)
        if callback is not None:
            callback(record)

    try:
        summary = call(hook)
    finally:
        shown.close()
    summary["metrics"] = _metrics(summary["out"])
    return summary


def train(model, data, out, scale="tiny", steps=None, batch=None, seq_len=None, lr=None, callback=None,
          progress=True, **options):
    """Trains a new model, as ``hymba train --preset P --scale S --data SPEC --out OUT``.

    model: a preset name (hymba.presets()) or a model config dict (its
    vocab_size comes from the tokenizer). data: a .txt file, a directory of
    .txt, a .jsonl with "text", or "default". Other recipe options by their
    flag names with underscores (warmup, eval_interval, tokenizer_type,
    resume, ...). callback(record) sees every step: step, steps, loss, lr,
    grad_norm, tokens_per_s, tokens (val_loss, val_ppl, val_accuracy after an
    evaluation). Ctrl-C stops at the next step with a checkpoint and raises
    KeyboardInterrupt; resume=True continues the run.

    Returns the run summary (summary.json's fields, "out", and "metrics":
    metrics.jsonl as a list of dicts).
    """
    opts = dict(options, data=os.fspath(data), out=os.fspath(out), steps=steps, batch=batch, seq_len=seq_len, lr=lr)
    return _run_training(lambda hook: _hymba._train(model, scale, opts, hook), opts, callback, progress)
